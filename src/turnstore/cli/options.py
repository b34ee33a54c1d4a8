"""The options the commands share, declared once: the database (``--db``, and ``--schema``
for a PostgreSQL one), the output
(``--json``, and for commands that print rows ``--ndjson``, ``--csv``, ``--tsv``), a session
argument, and the shapes of the filters (``--session``, ``--branch``, ``--user``, ``--agent``,
``--model``, ``--limit``, ``--since``/``--until``, ``--min``/``--max``) whose help each command
words for itself; ``--annotated NAME[=VALUE]`` whole, read by ``annotated_filters``.

``DbOption``, ``SchemaOption``, ``JsonOption`` and the other output flags are ``Annotated``
aliases; a filter is ``Annotated[str | None, session_option("Only this session's runs.")] =
None``; ``--since`` and ``--until`` are read by ``parse_time``.
"""

from __future__ import annotations

import os
from datetime import datetime, timedelta, timezone
from typing import Annotated, Any
from urllib.parse import quote, urlsplit, urlunsplit

import typer

from ..domain.targets import split_schema
from ..domain.units import written_duration
from ..errors import ConfigurationError, InvalidOperationError
from .output import Format, fail

__all__ = [
    "DEFAULT_DB",
    "ENV_DB",
    "AnnotatedOption",
    "CsvOption",
    "DbOption",
    "JsonOption",
    "NdjsonOption",
    "SchemaOption",
    "SessionArg",
    "TsvOption",
    "agent_option",
    "annotated_filters",
    "branch_option",
    "display_target",
    "limit_option",
    "model_option",
    "output_format",
    "parse_branch",
    "parse_time",
    "resolve_target",
    "root_options",
    "session_option",
    "user_option",
    "value_option",
    "when_option",
]

DEFAULT_DB = "turnstore.db"
ENV_DB = "TURNSTORE_DB"

DbOption = Annotated[
    str | None,
    typer.Option(
        "--db",
        metavar="PATH|URL",
        help=f"Database: a SQLite path or a postgresql:// URL (else ${ENV_DB}, else {DEFAULT_DB}).",
        show_default=False,
    ),
]
SchemaOption = Annotated[
    str | None,
    typer.Option(
        "--schema",
        metavar="NAME",
        help=(
            "PostgreSQL: the schema of turnstore's tables (else the URL's ?schema=NAME or "
            "?options=-csearch_path%3DNAME, else public)."
        ),
        show_default=False,
    ),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON (for scripts).", metavar="")]
NdjsonOption = Annotated[
    bool, typer.Option("--ndjson", help="Print one JSON object a line.", metavar="")
]
CsvOption = Annotated[bool, typer.Option("--csv", help="Print CSV with a header.", metavar="")]
TsvOption = Annotated[
    bool, typer.Option("--tsv", help="Print tab-separated values with a header.", metavar="")
]
SessionArg = Annotated[
    str, typer.Argument(metavar="SESSION", help="The session id.", show_default=False)
]


def session_option(help: str) -> Any:
    """``--session SESSION``: a filter on one session."""
    return typer.Option("--session", help=help, metavar="SESSION", show_default=False)


def branch_option(help: str) -> Any:
    """``--branch NAME|RUN``: a filter on one branch of ``--session``'s (``parse_branch``)."""
    return typer.Option("--branch", help=help, metavar="NAME|RUN", show_default=False)


def parse_branch(value: str | None, session: str | None) -> str | int | None:
    """The value of ``--branch``: digits are a run id (as in ``turn:N@RUN``), anything else a
    branch name; a usage error without ``--session``, since a branch is one session's."""
    if value is None:
        return None
    if session is None:
        raise fail(
            "--branch names a branch of one session: give --session SESSION too", 2, "UsageError"
        )
    return int(value) if value.isdigit() else value


def user_option(help: str) -> Any:
    """``--user USER``: a filter on one user's sessions."""
    return typer.Option("--user", help=help, metavar="USER", show_default=False)


def agent_option(help: str) -> Any:
    """``--agent AGENT``: a filter on the runs an agent answered."""
    return typer.Option("--agent", help=help, metavar="AGENT", show_default=False)


def model_option(help: str) -> Any:
    """``--model MODEL``: a filter on the runs a model answered."""
    return typer.Option("--model", help=help, metavar="MODEL", show_default=False)


def value_option(name: str, help: str) -> Any:
    """``--min``/``--max NUMBER``: an inclusive bound on annotations' values."""
    return typer.Option(name, help=help, metavar="NUMBER", show_default=False)


AnnotatedOption = Annotated[
    str | None,
    typer.Option(
        "--annotated",
        help="Only runs with an annotation NAME (NAME=VALUE: of that value, or label), "
        "e.g. thumbs=0.",
        metavar="NAME[=VALUE]",
        show_default=False,
    ),
]


def annotated_filters(annotated: str | None, **given: Any) -> dict[str, Any]:
    """``--annotated NAME[=VALUE]`` as the filters of ``Store.dataset`` (``annotation``,
    ``label``, ``min_value``, ``max_value``): VALUE is the annotation's value when it reads as
    a number, else its label. ``given``: the same filters given by options of their own,
    which the VALUE must leave unset."""
    if annotated is None:
        return {}
    name, sep, wanted = annotated.partition("=")
    if not sep:
        return {"annotation": name}
    try:
        value = float(wanted)
    except ValueError:
        chosen: dict[str, Any] = {"annotation": name, "label": wanted}
    else:
        chosen = {"annotation": name, "min_value": value, "max_value": value}
    for key in sorted(chosen.keys() & given.keys()):
        if given[key] is not None:
            option = "--" + key.removesuffix("_value")
            raise InvalidOperationError(
                f"--annotated {annotated} says it already: leave out {option}"
            )
    return chosen


def limit_option(help: str) -> Any:
    """``--limit N`` (at least 1)."""
    return typer.Option("--limit", help=help, metavar="N", min=1)


def when_option(name: str, help: str) -> Any:
    """``--since``/``--until WHEN``: an ISO 8601 date or time."""
    return typer.Option(name, help=help, metavar="WHEN", show_default=False)


def output_format(*, as_json: bool, ndjson: bool, csv: bool, tsv: bool) -> Format:
    """The one output the flags of a command that prints rows ask for (a table if none)."""
    flags = ((Format.json, as_json), (Format.ndjson, ndjson), (Format.csv, csv), (Format.tsv, tsv))
    chosen = [fmt for fmt, on in flags if on]
    if len(chosen) > 1:
        named = " and ".join(f"--{fmt.value}" for fmt in chosen)
        raise fail(f"{named} cannot be combined: choose one output", 2, "UsageError")
    return chosen[0] if chosen else Format.table


_DURATIONS = "90d, 12h, 30m or 2w (s, m, h, d, w)"


def parse_duration(text: str, option: str) -> timedelta:
    """``90d``, ``12h``, ``30m``, ``2w``, ``45s`` as a timedelta (more than zero, at most a
    thousand years)."""
    try:
        span = written_duration(text)
    except ValueError:
        span = None
    if span is None:
        raise InvalidOperationError(
            f"{option} takes a duration of more than zero and at most 1000 years, such as "
            f"{_DURATIONS}, not {text!r}"
        )
    return span


def parse_time(value: str | None, option: str) -> datetime | None:
    """The value of ``--since``/``--until``: an ISO 8601 date or time, or a duration back
    from now (``7d``, ``12h``: as ``prune --idle-for`` takes it)."""
    if value is None:
        return None
    try:
        span = written_duration(value)
        return (
            datetime.now(timezone.utc) - span if span is not None else datetime.fromisoformat(value)
        )
    except ValueError:
        # A one-line error wherever a command parses it (inside run_command or before it).
        raise fail(
            f"{option} takes an ISO 8601 date or time (2025-01-31, 2025-01-31T12:00) or a "
            f"duration back from now (7d, 12h, 30m), not {value!r}",
            kind=InvalidOperationError.__name__,
        ) from None


def resolve_target(ctx: typer.Context, db: str | None, schema: str | None = None) -> str:
    """The database: the command's --db, the global --db, $TURNSTORE_DB, or the default; with
    the command's (else the global) --schema folded into a PostgreSQL URL as ``?schema=``,
    so that one string names the database everywhere after."""
    root_db, root_schema = root_options(ctx)
    # An option given empty (`--db "$DB"` with DB unset) is refused, not taken for "not given":
    # that would run the command on another database or schema than the one named.
    named = db if db is not None else root_db
    if named == "":
        raise typer.BadParameter(
            "is empty: name a SQLite path or a postgresql:// URL", param_hint="--db"
        )
    target = named or os.environ.get(ENV_DB) or DEFAULT_DB
    return with_schema(target, schema if schema is not None else root_schema)


def root_options(ctx: typer.Context) -> tuple[str | None, str | None]:
    """The --db and --schema given before the command's name (None: not given)."""
    root = ctx.find_root().obj
    return root if isinstance(root, tuple) else (None, None)


def with_schema(target: str, schema: str | None) -> str:
    """``target`` naming ``schema`` (None: unchanged); a usage error for a SQLite target, or a
    URL that names another schema."""
    if schema is None:
        return target
    if "://" not in target:
        raise typer.BadParameter(
            f"names a PostgreSQL schema, but the database is SQLite: {target}",
            param_hint="--schema",
        )
    try:
        split_schema(target, schema)  # a name PostgreSQL takes, and no other in the URL
    except ConfigurationError as exc:
        raise typer.BadParameter(str(exc), param_hint="--schema") from None
    # Named twice alike is one name (targets.split_schema).
    return f"{target}{'&' if '?' in target else '?'}schema={quote(schema, safe='')}"


def display_target(target: str) -> str:
    """``target`` fit to print: a URL's password masked."""
    parts = urlsplit(target) if "://" in target else None
    if parts is None or parts.password is None:
        return target
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urlunsplit(parts._replace(netloc=netloc))
