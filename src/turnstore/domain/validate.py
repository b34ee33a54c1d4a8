"""The checks of every public call's arguments: one rule, declared once.

The rule (docs/reliability.md, "Refusals"):

- **Opening** a database (``Store.open``, ``migrate``, a ``StructuredSession``'s ``db``): a
  target or option it cannot open with is ``ConfigurationError``.
- **Items** that cannot be stored as given are ``InvalidItemError``.
- **Any other argument** of the wrong type or out of its range is ``InvalidOperationError``;
  of the wrong type, its subclass ``ArgumentTypeError``, a ``TypeError`` too (as the SDK's
  sessions raise).
- **Ids** are ints. One that names nothing is ``NotFoundError`` where it is looked up, and
  matches nothing where it filters. An int outside the 64-bit range names nothing on any
  database, so it is such an unknown id (not a wrong argument); any other type is wrong.

A refused call changes nothing: the checks run before the call reaches the database, but
for the few that need what is stored (the item an edit makes), which run in the write's
transaction and roll it back. Text arguments hold no NUL (PostgreSQL's text refuses it) and
no lone surrogate (no UTF-8 encoder writes one); JSON values (items, metadata) nest at most
``MAX_DEPTH`` deep.
"""

from __future__ import annotations

import inspect
import json
import math
import os
import reprlib
import unicodedata
from collections.abc import Callable, Collection, Mapping
from datetime import datetime, timezone
from typing import Any, TypeVar

from ..errors import ArgumentTypeError, ConfigurationError, InvalidOperationError, NotFoundError
from .model import (
    DETAIL_FIELDS,
    TOKEN_FIELDS,
    ResponseRecord,
    SessionPatch,
    Telemetry,
    ToolTiming,
    Usage,
)
from .text import encodes, storable
from .tokens import MAX_INT, clamped, clamped_details, is_count, is_detail_name

__all__ = [
    "MAX_BRANCH_NAME",
    "MAX_DEPTH",
    "MAX_INT",
    "MAX_KEY_BYTES",
    "MAX_REQUESTS",
    "branch_name",
    "check_json",
    "choice",
    "clamped_usage",
    "count",
    "duration",
    "filter_id",
    "finite",
    "flag",
    "instance",
    "json_object",
    "key",
    "label_text",
    "lookup_id",
    "metadata",
    "metadata_filter",
    "metadata_text",
    "open_options",
    "open_target",
    "optional_key",
    "optional_text",
    "optional_time",
    "optional_usage",
    "patch_record",
    "shown",
    "store_backend",
    "telemetry_record",
    "text",
    "text_list",
    "time",
]

MAX_REQUESTS = 2**31 - 1
"""The most requests a run or model call counts (PostgreSQL keeps them in INTEGER columns)."""

MAX_KEY_BYTES = 1024
"""The longest session_id or user_id, in UTF-8 bytes.

They are keys of PostgreSQL's B-tree indexes, whose entries must fit in a third of a page
(~2.7 kB): two keys of this size fit in one entry with room to spare. The limit holds on every
backend, so that a database can move from SQLite to PostgreSQL.
"""

MAX_BRANCH_NAME = 200
"""The longest branch name, in characters: a label to read and type, and a key of an index."""

MAX_DEPTH = 200
"""How deep an item or metadata value may nest lists and objects.

Far deeper than any model's items; deep enough below Python's recursion limit (1,000) that
encoding, decoding and exporting such a value never runs out of stack.
"""

T = TypeVar("T")


# ---------------------------------------------------------------------------------------------
# Showing a value in a message

_SHOWN = reprlib.Repr()
_SHOWN.maxlevel = 3
_SHOWN.maxstring = _SHOWN.maxother = 80
_SHOWN.maxlong = 40


def shown(value: Any) -> str:
    """``value`` as every error message shows it: its repr, bounded in depth and length.

    A wrong argument can be anything: a list nested 1,000 deep (whose repr runs out of stack),
    a megabyte of text, an int past Python's digit limit, an object whose ``__repr__`` fails.
    """
    try:
        return _SHOWN.repr(value)
    except Exception:  # an int too long to write, a failing __repr__ inside a container
        return f"<{type(value).__name__}>"


# ---------------------------------------------------------------------------------------------
# Text


def text(value: Any, name: str) -> str:
    """``value`` if it is a str without NUL or lone surrogates."""
    if not isinstance(value, str):
        raise ArgumentTypeError(f"{name} must be a str, got {type(value).__name__}")
    if "\x00" in value:
        raise InvalidOperationError(f"{name} must be text without NUL, got {shown(value)}")
    if not encodes(value):
        # What a command-line argument that is not UTF-8 decodes to.
        raise InvalidOperationError(
            f"{name} is not valid UTF-8 text (it holds a lone surrogate): {shown(value)}"
        )
    return value


def optional_text(value: Any, name: str) -> str | None:
    """``text(value, name)``, or None for None."""
    return None if value is None else text(value, name)


def key(value: Any, name: str) -> str:
    """``value`` if it is text (see ``text``) of at most ``MAX_KEY_BYTES`` in UTF-8."""
    checked = text(value, name)
    # A character is at most 4 bytes: short keys need no encoding to be measured.
    if len(checked) > MAX_KEY_BYTES // 4 and len(checked.encode()) > MAX_KEY_BYTES:
        raise InvalidOperationError(
            f"{name} must be at most {MAX_KEY_BYTES} bytes in UTF-8, got {len(checked.encode())}"
        )
    return checked


def branch_name(value: Any) -> str:
    """``value`` if it names a branch: a label (``label_text``) of at most ``MAX_BRANCH_NAME``
    characters; stored exactly."""
    return label_text(value, "a branch name", MAX_BRANCH_NAME)


def new_branch_name(name: Any, take: Any) -> tuple[str | None, bool]:
    """``name`` (a branch name, or None) and ``take`` of a write naming the branch it starts
    (``Store.fork(name=, take=)``): ``take`` moves a name, so it needs one."""
    if flag(take, "take") and name is None:
        raise InvalidOperationError("take=True moves a name to the new branch: pass name=")
    return (None if name is None else branch_name(name)), take


def label_text(value: Any, what: str, limit: int) -> str:
    """``value`` if it is a label (a branch or annotation name): text (see ``text``) of 1 to
    ``limit`` characters without control characters or surrounding whitespace."""
    checked = text(value, what)
    if not checked or checked != checked.strip():
        raise InvalidOperationError(
            f"{what} must be non-empty, without leading or trailing whitespace, got "
            f"{shown(checked)}"
        )
    if len(checked) > limit:
        raise InvalidOperationError(
            f"{what} must be at most {limit} characters, got {len(checked)}"
        )
    if any(unicodedata.category(char) == "Cc" for char in checked):
        raise InvalidOperationError(
            f"{what} must not hold control characters (a newline, a tab, an escape), "
            f"got {shown(checked)}"
        )
    return checked


def optional_key(value: Any, name: str) -> str | None:
    """``key(value, name)``, or None for None."""
    return None if value is None else key(value, name)


def text_list(values: Any, name: str) -> list[str] | None:
    """``values`` (a list or tuple of text, see ``text``) as a list, or None for None."""
    if values is None:
        return None
    if not isinstance(values, (list, tuple)):
        raise ArgumentTypeError(f"{name} must be a list of str, got {type(values).__name__}")
    return [text(value, f"each of {name}") for value in values]


def choice(value: Any, name: str, choices: Collection[T]) -> T:
    """The one of ``choices`` that ``value`` is (a str enum's member counts as its value)."""
    # Compared, not looked up: a list, say, is not hashable, and simply none of them.
    for option in choices:
        if isinstance(value, type(option)) and value == option:
            return option
    raise InvalidOperationError(f"{name} is one of {tuple(choices)}, not {shown(value)}")


def instance(value: Any, name: str, kind: type[T]) -> T:
    """``value`` if it is a ``kind`` (one of turnstore's records, e.g. ``SessionPatch``)."""
    if not isinstance(value, kind):
        raise ArgumentTypeError(f"{name} must be a {kind.__name__}, got {type(value).__name__}")
    return value


def flag(value: Any, name: str) -> bool:
    """``value`` if it is a bool."""
    if not isinstance(value, bool):
        raise ArgumentTypeError(f"{name} must be True or False, got {shown(value)}")
    return value


# ---------------------------------------------------------------------------------------------
# Numbers, ids and times


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def count(value: Any, name: str, *, minimum: int = 0) -> int:
    """``value`` if it is an int from ``minimum`` to ``MAX_INT`` (a limit, a position)."""
    if not _is_int(value) or not minimum <= value <= MAX_INT:
        # A wrong type is a TypeError too (what SQLiteSession raises for limit="2").
        error = InvalidOperationError if _is_int(value) else ArgumentTypeError
        raise error(f"{name} must be an int from {minimum} to 2**63 - 1, got {shown(value)}")
    result: int = value
    return result


def _usage_limit(name: str) -> int:
    return MAX_REQUESTS if name == "requests" else MAX_INT


def clamped_usage(**figures: Any) -> Usage:
    """A ``Usage`` of figures someone else counted (the SDK's), as the database stores them:
    each clamped into 0..its limit (``MAX_REQUESTS`` requests, ``MAX_INT`` tokens), anything
    not a number 0; details by ``clamped_details``. Never raises (a turn is never lost)."""
    kept: dict[str, Any] = {}
    for name, value in figures.items():
        if name in DETAIL_FIELDS:
            kept[name] = clamped_details(value)
        else:
            kept[name] = clamped(value, _usage_limit(name))
    return Usage(**kept)


def lookup_id(value: Any, what: str, not_found: type[NotFoundError] = NotFoundError) -> int:
    """``value`` if it is an int id that can exist; ``not_found`` if it is out of range."""
    if not _is_int(value):
        raise ArgumentTypeError(f"{what} ids are ints, got {shown(value)}")
    if not -MAX_INT - 1 <= value <= MAX_INT:
        raise not_found(f"no {what} {shown(value)}")
    result: int = value
    return result


def filter_id(value: Any, name: str) -> int | None:
    """``value`` (an int id, or None for no filter) as a bindable id matching the same rows."""
    if value is None:
        return None
    if not _is_int(value):
        raise ArgumentTypeError(f"{name} must be an int id, got {shown(value)}")
    # Ids start at 1 on both backends: 0 matches nothing, as an id out of range would.
    result: int = value if -MAX_INT - 1 <= value <= MAX_INT else 0
    return result


def optional_time(value: Any, name: str) -> datetime | None:
    """``time(value, name)``, or None for None."""
    return None if value is None else time(value, name)


def time(value: Any, name: str) -> datetime:
    """``value`` if it is a datetime (naive ones are UTC) that UTC can hold."""
    if not isinstance(value, datetime):
        raise ArgumentTypeError(f"{name} must be a datetime, got {type(value).__name__}")
    if value.tzinfo is not None:
        try:  # both backends store UTC: the first instant of year 1 at +14:00 is before it
            value.astimezone(timezone.utc)
        except OverflowError:
            raise InvalidOperationError(
                f"{name} is out of range once in UTC (years 1 to 9999): {value.isoformat()}"
            ) from None
    return value


def iso_time(value: Any, name: str) -> datetime:
    """``value``, an ISO 8601 time as text (an export's, a source's), as a datetime the
    database can store (see ``optional_time``)."""
    try:
        when = datetime.fromisoformat(value)
        optional_time(when, name)
    except (TypeError, ValueError):  # InvalidOperationError is one
        raise InvalidOperationError(
            f"{name} must be an ISO 8601 time, got {shown(value)}"
        ) from None
    return when


def finite(value: Any) -> float | None:
    """``value`` as a float if it is a finite int or float (not a bool), else None."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            number = float(value)
        except OverflowError:  # an int beyond any float
            return None
        return number if math.isfinite(number) else None
    return None


def duration(value: Any, name: str) -> float:
    """``value``, a finite number of milliseconds from 0 (a latency, a tool's run), as a float."""
    ms = finite(value)
    if ms is None or ms < 0:
        raise InvalidOperationError(
            f"{name} must be a finite number of milliseconds from 0, got {shown(value)}"
        )
    return ms


def optional_usage(value: Any, name: str = "usage") -> Usage | None:
    """``value`` if it is a ``Usage`` of ints from 0 to their limit (``MAX_REQUESTS``
    requests, ``MAX_INT`` tokens), or None."""
    if value is None:
        return None
    if not isinstance(value, Usage):
        raise ArgumentTypeError(f"{name} must be a turnstore Usage, got {type(value).__name__}")
    for field in TOKEN_FIELDS:
        figure = getattr(value, field)
        if not _is_int(figure) or not 0 <= figure <= _usage_limit(field):
            raise InvalidOperationError(
                f"{name}.{field} must be an int from 0 to {_usage_limit(field)}, "
                f"got {shown(figure)}"
            )
    for field in DETAIL_FIELDS:
        details = getattr(value, field)
        if not isinstance(details, dict) or not all(
            is_detail_name(key) and is_count(count) for key, count in details.items()
        ):
            raise InvalidOperationError(
                f"{name}.{field} must map names (text without NUL or lone surrogates) to "
                f"ints from 0 to {MAX_INT}, got {shown(details)}"
            )
    return value


# ---------------------------------------------------------------------------------------------
# JSON values: items and metadata

_CONTAINERS = frozenset({dict, list, tuple})
_ASCII_ENCODER = json.JSONEncoder()


def check_json(value: Any, depth: int = MAX_DEPTH) -> None:
    """Raise ValueError when ``value`` nests lists and objects more than ``MAX_DEPTH`` deep,
    or when two keys of one of its dicts are the same key in JSON.

    JSON keys are text: ``json`` writes 1, 1.0, True and None as "1", "1.0", "true" and
    "null", so ``{"1": "a", 1: "b"}`` would be written with the key twice and read back with
    one value lost. One walk checks both, before anything encodes the value (which is where a
    deeper value would exhaust the stack); a key ``json`` cannot write raises TypeError.
    """
    if depth == 0:
        raise ValueError(f"it nests lists and objects more than {MAX_DEPTH} deep")
    if isinstance(value, dict):
        keys: Any = value
        if not all(type(name) is str for name in keys):
            seen: set[str] = set()
            for name in keys:
                # The encoder's own conversion ('{"1": 0}'): plain ASCII, no escapes.
                text = name if isinstance(name, str) else _ASCII_ENCODER.encode({name: 0})[2:-5]
                if text in seen:
                    raise ValueError(
                        f"two keys of one object are both {shown(text)} in JSON, so one value "
                        "would be lost"
                    )
                seen.add(text)
        values: Any = value.values()
    else:
        values = value
    for child in values:
        kind = type(child)
        if kind in _CONTAINERS or (kind is not str and isinstance(child, (dict, list, tuple))):
            check_json(child, depth - 1)


def metadata(value: Any, name: str = "metadata") -> str:
    """``value`` (a mapping with str keys) as the JSON text stored for it."""
    if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
        raise ArgumentTypeError(f"{name} must be a mapping with str keys")
    try:
        check_json(dict(value))
        data = json.dumps(dict(value), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InvalidOperationError(f"{name} must be JSON-serialisable: {exc}") from None
    # PostgreSQL's jsonb refuses \u0000, and UTF-8 lone surrogates: refuse them everywhere.
    if "\\u0000" in data or not encodes(data):
        raise InvalidOperationError(f"{name} must not hold NUL or lone surrogates")
    return data


def metadata_text(value: Any, name: str = "metadata") -> str:
    """``value``, the JSON text of an object (a ``SessionPatch``'s metadata), as the text
    ``metadata`` stores for that object: one rule for metadata however it is given."""
    return metadata(json_object(value, name), name)


def json_object(value: Any, name: str) -> dict[str, Any]:
    """The object ``value`` is the JSON text of (see ``text``), not yet checked as a value
    (``metadata`` does that: NaN and Infinity parse, though JSON has neither)."""
    try:
        decoded = json.loads(text(value, name))
    except (ValueError, RecursionError):  # InvalidOperationError is a ValueError
        raise InvalidOperationError(
            f"{name} must be the JSON text of an object, got {shown(value)}"
        ) from None
    if not isinstance(decoded, dict):
        raise InvalidOperationError(
            f"{name} must be the JSON text of an object, got {type(decoded).__name__} text"
        )
    return decoded


_SCALARS = (str, int, float, bool, type(None))


def metadata_filter(value: Any) -> str | None:
    """The JSON text of a metadata filter (key -> scalar value), or None for no filter.

    Only scalar values are accepted, so that "contains" means the same on every backend:
    each key is present with an equal value (numbers compare by value, ``True`` is not 1).
    """
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise InvalidOperationError(
            f"a metadata filter is a mapping of key to value, got {type(value).__name__}"
        )
    for name, wanted in value.items():
        text(name, "a metadata filter's key")
        if isinstance(wanted, str):
            text(wanted, f"the metadata filter's {shown(name)}")
        elif not isinstance(wanted, _SCALARS) or (
            isinstance(wanted, float) and not math.isfinite(wanted)
        ):
            raise InvalidOperationError(
                f"metadata filter values are str, int, float, bool or None; {shown(name)} is "
                f"{type(wanted).__name__}"
            )
    return json.dumps(dict(value), ensure_ascii=False) if value else None


# ---------------------------------------------------------------------------------------------
# Records a caller builds: each field checked as the keyword argument it stands for


def patch_record(value: Any, name: str = "patch") -> SessionPatch:
    """``value``, a ``SessionPatch`` whose fields ``update_session`` would take (``user_id`` a
    key, ``title`` text, ``metadata`` the JSON text of an object), with its metadata as
    stored (``metadata_text``)."""
    patch = instance(value, name, SessionPatch)
    return SessionPatch(
        user_id=optional_key(patch.user_id, f"{name}.user_id"),
        title=optional_text(patch.title, f"{name}.title"),
        metadata=None
        if patch.metadata is None
        else metadata_text(patch.metadata, f"{name}.metadata"),
    )


def telemetry_record(value: Any, name: str = "telemetry") -> Telemetry:
    """``value``, a ``Telemetry`` whose lists hold ``ResponseRecord`` and ``ToolTiming``
    records of checked fields: text (see ``text``), a ``Usage`` (see ``optional_usage``),
    times (see ``time``), durations (see ``duration``). A copy: the caller's lists may change
    after the call."""
    telemetry = instance(value, name, Telemetry)
    responses = _record_list(telemetry.responses, f"{name}.responses", ResponseRecord)
    tools = _record_list(telemetry.tools, f"{name}.tools", ToolTiming)
    return Telemetry(
        [_response(record, f"{name}.responses[{n}]") for n, record in enumerate(responses)],
        [_timing(timing, f"{name}.tools[{n}]") for n, timing in enumerate(tools)],
    )


def _record_list(values: Any, name: str, kind: type[T]) -> list[T]:
    if not isinstance(values, (list, tuple)):
        raise ArgumentTypeError(
            f"{name} must be a list of {kind.__name__}, got {type(values).__name__}"
        )
    return [instance(value, f"each of {name}", kind) for value in values]


def _response(record: ResponseRecord, name: str) -> ResponseRecord:
    usage = optional_usage(record.usage, f"{name}.usage")
    if usage is None:
        raise InvalidOperationError(f"{name}.usage must be a turnstore Usage, got None")
    return ResponseRecord(
        agent_name=optional_text(record.agent_name, f"{name}.agent_name"),
        model=optional_text(record.model, f"{name}.model"),
        response_id=optional_text(record.response_id, f"{name}.response_id"),
        request_id=optional_text(record.request_id, f"{name}.request_id"),
        usage=usage,
        started_at=optional_time(record.started_at, f"{name}.started_at"),
        completed_at=time(record.completed_at, f"{name}.completed_at"),
        latency_ms=None
        if record.latency_ms is None
        else duration(record.latency_ms, f"{name}.latency_ms"),
    )


def _timing(timing: ToolTiming, name: str) -> ToolTiming:
    return ToolTiming(
        call_id=text(timing.call_id, f"{name}.call_id"),
        started_at=time(timing.started_at, f"{name}.started_at"),
        completed_at=time(timing.completed_at, f"{name}.completed_at"),
        duration_ms=duration(timing.duration_ms, f"{name}.duration_ms"),
    )


# ---------------------------------------------------------------------------------------------
# Opening


def store_backend(value: T) -> T:
    """``value`` if it can be a ``Store``'s backend (``Store(backend)``): an open database is
    ``Store.open(path or URL)``, which a path or URL given to ``Store`` is refused naming."""
    if isinstance(value, (str, bytes, os.PathLike)):
        raise ConfigurationError(
            f"Store() takes an open backend, not a path or URL ({shown(value)}): open the "
            f"database with Store.open({shown(value)})"
        )
    if not callable(getattr(value, "run", None)):
        raise ConfigurationError(
            f"Store() takes an open backend (a turnstore.Backend), got {type(value).__name__}: "
            "open a database with Store.open(path or URL)"
        )
    return value


def open_target(target: str) -> str:
    """``target`` (a path or URL) if a database could be opened by it."""
    if not storable(target):
        raise ConfigurationError(
            f"a database path or URL holds no NUL and is valid UTF-8, got {shown(target)}"
        )
    return target


def sqlite_file_path(path: str) -> str:
    """``path`` if SQLite takes it as a file's name. A name starting ``file:`` is a URI to
    SQLite where it is built to read URIs (Debian's is), and a file's name elsewhere: refused,
    so that one target names one file everywhere (the open, ``inspect``, the CLI's checks)."""
    if path.startswith("file:"):
        raise ConfigurationError(
            f"{shown(path)} is a SQLite URI: name the database by its path or as sqlite:///path "
            "(./file:… for a file whose name starts with file:); read_only=True opens it "
            "read-only"
        )
    return path


def option_text(value: Any, name: str) -> str:
    """``value`` if it is text an open can take (as ``text``), else a ConfigurationError."""
    try:
        return text(value, name)
    except InvalidOperationError as exc:
        raise ConfigurationError(str(exc)) from None


def open_options(opener: Callable[..., Any], what: str, options: Mapping[str, Any]) -> None:
    """Refuse options that ``opener`` does not take, or whose value is not of the kind of its
    default: a bool for a bool, a finite number >= 0 for a number (an int for an int), text
    for text. Options without a default value of those kinds are the opener's to check."""
    parameters = inspect.signature(opener).parameters
    for name, value in options.items():
        parameter = parameters.get(name)
        if parameter is None or parameter.kind is not inspect.Parameter.KEYWORD_ONLY:
            known = ", ".join(
                p.name for p in parameters.values() if p.kind is inspect.Parameter.KEYWORD_ONLY
            )
            raise ConfigurationError(f"{what} takes no option {shown(name)}; its options: {known}")
        default = parameter.default
        if isinstance(default, bool):
            if not isinstance(value, bool):
                raise ConfigurationError(f"{name} must be True or False, got {shown(value)}")
        elif isinstance(default, (int, float)):
            kinds = int if isinstance(default, int) else (int, float)
            if (
                isinstance(value, bool)
                or not isinstance(value, kinds)
                or not (math.isfinite(value) and 0 <= value <= MAX_INT)
            ):
                kind = "an int" if kinds is int else "a number"
                raise ConfigurationError(f"{name} must be {kind} >= 0, got {shown(value)}")
        elif isinstance(default, str):
            option_text(value, name)


def _count(value: Any) -> int | None:
    """A token or request count (None and 0 are 0; digits and whole floats count), or None
    when ``value`` is not one: text, a fraction, a bool, negative, beyond 64 bits."""
    if value is None:
        return 0
    if (isinstance(value, float) and value.is_integer()) or (
        isinstance(value, str) and value.isascii() and value.isdigit()
    ):
        value = int(value)
    if type(value) is not int or not 0 <= value < 2**63:
        return None
    return value


def checked_usage(counts: dict[str, Any]) -> Usage | None:
    """A ``Usage`` of the counts named by its fields, or None if any is not a count the
    database stores (``validate.optional_usage``: requests fit PostgreSQL's INTEGER); its
    token details by ``clamped_details``."""
    checked = {name: _count(counts.get(name)) for name in TOKEN_FIELDS}
    if any(count is None for count in checked.values()):
        return None
    details = {name: clamped_details(counts.get(name)) for name in DETAIL_FIELDS}
    try:
        return optional_usage(Usage(**checked, **details))  # type: ignore[arg-type]
    except InvalidOperationError:
        return None
