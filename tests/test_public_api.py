"""The public API is sealed: ``turnstore.__all__`` is all of it, and it names every type a
public signature uses (a user can annotate whatever they pass or get back)."""

from __future__ import annotations

import builtins
import dataclasses
import importlib.metadata
import inspect
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

import turnstore
from turnstore import Store

# Names a public signature may use that turnstore does not define: the standard library's and
# the Agents SDK's (``SessionSettings``). ``SessionHooks`` (``StructuredSession.hooks``) lives
# in ``turnstore.agents.hooks``, which needs the SDK, so ``import turnstore`` cannot import it.
FOREIGN = {
    "Any",
    "AsyncIterator",
    "Awaitable",
    "BaseException",
    "Callable",
    "IO",
    "Iterable",
    "Iterator",
    "Literal",
    "Mapping",
    "PathLike",
    "Sequence",
    "SessionSettings",
    "TracebackType",
    "date",
    "datetime",
    "os",
    "SessionHooks",
}
# The backend protocol is exported (``Store(backend)``, ``Store.backend``), but the signatures
# of its methods are the seam for whoever adds a backend: ``turnstore.core.ops`` (``Op``,
# ``Query``, ``Fetch``), documented in docs/design.md, not the user's API.
SEAM = {"Backend"}
_NAME = re.compile(r"[A-Za-z_][A-Za-z_0-9]*")
_STRING = re.compile(r"'[^']*'|\"[^\"]*\"")


def _annotations(obj: Callable[..., Any]) -> Iterator[str]:
    try:
        signature = inspect.signature(obj)
    except (TypeError, ValueError):
        return
    for parameter in signature.parameters.values():
        if parameter.annotation is not inspect.Parameter.empty:
            yield str(parameter.annotation)
    if signature.return_annotation is not inspect.Signature.empty:
        yield str(signature.return_annotation)


def _public_annotations() -> Iterator[tuple[str, str]]:
    """(where, annotation) of every public signature and public dataclass field."""
    for name in turnstore.__all__:
        obj = getattr(turnstore, name)
        if inspect.isfunction(obj):
            for annotation in _annotations(obj):
                yield name, annotation
        if not inspect.isclass(obj) or name in SEAM:
            continue
        if dataclasses.is_dataclass(obj):
            for field in dataclasses.fields(obj):
                yield f"{name}.{field.name}", str(field.type)
        for member, value in vars(obj).items():
            if member.startswith("_") and member != "__init__":
                continue
            if isinstance(value, property) and value.fget is not None:
                value = value.fget
            if isinstance(value, (classmethod, staticmethod)):
                value = value.__func__
            if inspect.isfunction(value):
                for annotation in _annotations(value):
                    yield f"{name}.{member}", annotation
        for base in obj.__mro__[1:]:  # the Store's methods live in its mixins
            if base.__module__.startswith("turnstore."):
                for member, value in vars(base).items():
                    public = not member.startswith("_") or member == "__init__"
                    if public and inspect.isfunction(value):
                        for annotation in _annotations(value):
                            yield f"{name}.{member}", annotation


def _isort_key(name: str) -> tuple[int, str]:
    """ruff's RUF022 order: constants (ANY_HEAD), then classes, then functions."""
    return (0 if name.isupper() else 1 if name[:1].isupper() else 2, name)


def test_all_is_sorted_and_complete() -> None:
    assert turnstore.__all__ == sorted(turnstore.__all__, key=_isort_key)
    assert len(set(turnstore.__all__)) == len(turnstore.__all__)
    for name in turnstore.__all__:
        assert hasattr(turnstore, name), name


def test_the_version_is_the_installed_distribution_s(monkeypatch: pytest.MonkeyPatch) -> None:
    from turnstore import __version__

    assert __version__ == turnstore.__version__ == importlib.metadata.version("turnstore")

    def not_installed(name: str) -> str:
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "version", not_installed)
    assert turnstore.__version__ == "0+unknown"  # a source tree that was never installed
    with pytest.raises(AttributeError):
        turnstore.__versions__  # noqa: B018


def test_every_type_a_public_signature_uses_is_exported() -> None:
    missing = set()
    for where, annotation in _public_annotations():
        for used in _NAME.findall(_STRING.sub("", annotation)):
            if used in FOREIGN or hasattr(builtins, used) or used in turnstore.__all__:
                continue
            missing.add(f"{used} (in {where})")
    assert not missing, sorted(missing)


def test_every_default_of_turnstore_s_own_is_exported() -> None:
    """``expected_head=ANY_HEAD``: a default a caller may want to pass back is importable."""
    exported = [getattr(turnstore, name) for name in turnstore.__all__]
    for name in turnstore.__all__:
        obj = getattr(turnstore, name)
        methods = [obj] if inspect.isfunction(obj) else []
        if inspect.isclass(obj):
            for base in obj.__mro__:
                methods += [v for v in vars(base).values() if inspect.isfunction(v)]
        for method in methods:
            for parameter in inspect.signature(method).parameters.values():
                default = parameter.default
                if type(default).__module__.startswith("turnstore"):
                    assert any(default is value for value in exported), (name, parameter.name)


def test_importing_turnstore_needs_neither_the_sdk_nor_a_driver() -> None:
    code = (
        "import sys, turnstore; "
        "print(sorted(m for m in ('agents', 'psycopg', 'typer', 'starlette') if m in sys.modules))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert result.stdout.strip() == "[]"


async def test_a_backend_answers_what_callers_ask(
    store: Store, db_target: tuple[str, dict[str, Any]], backend_name: str
) -> None:
    """Nobody guesses the backend from its class or its values: it says."""
    backend = store.backend
    target, _ = db_target
    assert backend.dialect == ("postgresql" if backend_name == "postgres" else "sqlite")
    if backend.dialect == "sqlite":
        assert backend.label == target
    else:
        assert backend.label.startswith("PostgreSQL at ")
        assert "password" not in backend.label
    assert backend.schema_version == backend.found_version or backend.found_version is None
    await store.add_items("s", [{"role": "user", "content": "hi"}])
    assert backend.found_version in (None, backend.schema_version)
    # bind_time: what now() returns, and so what is stored; naive datetimes are UTC.
    aware = datetime(2026, 1, 2, 3, 4, 5, 6, tzinfo=timezone(timedelta(hours=2)))
    bound = backend.bind_time(aware)
    assert type(bound) is type(backend.now())
    assert backend.bind_time(aware.replace(tzinfo=None) - timedelta(hours=2)) == bound
    assert [run.created_at for run in await store.runs("s")]  # a stored time reads back
    page = await store.sessions(created_after=aware)
    assert [info.session_id for info in page.sessions] == ["s"]
    assert not backend.closed
    store.close()
    assert backend.closed
