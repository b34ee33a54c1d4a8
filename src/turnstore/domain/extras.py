"""The optional parts of turnstore (its extras) and the one message that names a missing one.

``pip install turnstore`` brings the library alone; the command line, the web viewer, the
PostgreSQL backend and the Agents SDK are extras. What needs one says so in one line, with
the command that installs it, instead of failing on an import deep inside.
"""

from __future__ import annotations

import importlib.util

from ..errors import ConfigurationError

__all__ = ["EXTRAS", "missing", "missing_extra", "require"]

# Each extra of pyproject.toml and the modules it brings (tests/test_packaging.py keeps the
# two in step).
EXTRAS: dict[str, tuple[str, ...]] = {
    "agents": ("agents",),
    "postgres": ("psycopg", "psycopg_pool"),
    "cli": ("typer", "rich"),
    "web": ("starlette", "jinja2", "uvicorn"),
    "otel": ("opentelemetry",),
}


def missing(extra: str) -> str | None:
    """The first module of ``extra`` that is not installed, or None when all are."""
    for module in EXTRAS[extra]:
        if importlib.util.find_spec(module) is None:
            return module
    return None


def missing_extra(extra: str, what: str, module: str | None = None) -> ConfigurationError:
    """The error for ``what`` (``"the web viewer"``) needing ``extra``, in one line."""
    because = f" ({module} is missing)" if module else ""
    return ConfigurationError(
        f"{what} needs the {extra} extra{because}: pip install 'turnstore[{extra}]'"
    )


def require(extra: str, what: str) -> None:
    """Refuse ``what`` unless ``extra`` is installed (``missing_extra``)."""
    module = missing(extra)
    if module is not None:
        raise missing_extra(extra, what, module)
