"""The suite's own guards: a test that lacks what it needs skips locally and fails in CI."""

from __future__ import annotations

import pytest

import conftest
from conftest import require_module

MISSING = "turnstore_no_such_module"


def test_require_module_returns_an_installed_module() -> None:
    assert require_module("psycopg").__name__ == "psycopg"


def test_a_missing_module_skips_outside_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(conftest, "IN_CI", False)
    with pytest.raises(pytest.skip.Exception, match=MISSING):
        require_module(MISSING)


def test_a_missing_module_fails_under_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(conftest, "IN_CI", True)
    with pytest.raises(pytest.fail.Exception, match=f"{MISSING}.*CI=true"):
        require_module(MISSING)
