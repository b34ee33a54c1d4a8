"""The source of a SQLite file of the SDK's ``SQLiteSession`` or ``AdvancedSQLiteSession``
(its branches and per-turn usage), read through a read-only connection.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from ..domain import validate
from ..domain.model import Usage
from ..errors import ConnectionFailedError, InvalidOperationError, SchemaError
from ..sqlite import connect_read_only
from .base import (
    Source,
    SourceRow,
    SourceSession,
    TreeBuilder,
    decode_item,
    linear_session,
    runs_of,
)

__all__ = ["SQLiteSource", "connect_readonly", "sqlite_tables"]


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def connect_readonly(path: Path) -> sqlite3.Connection:
    """A read-only connection to the SQLite file ``path`` (which must exist), also in a
    directory it cannot write."""
    conn = connect_read_only(path)
    conn.text_factory = _text
    return conn


def _text(value: bytes) -> str | bytes:
    # TEXT that is not UTF-8 comes back as bytes (sqlite3 would fail the whole query): the
    # readers skip and count what holds it, and go on.
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        return value


def sqlite_tables(conn: sqlite3.Connection, name: str | Path) -> list[str]:
    """The tables of a SQLite database; ``ConnectionFailedError`` if it is not one."""
    try:
        rows = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
    except sqlite3.DatabaseError as exc:
        raise ConnectionFailedError(f"{name} is not a SQLite database ({exc})") from exc
    # A name that is not UTF-8 (see _text) is shown, never matched.
    return [t if isinstance(t, str) else t.decode("utf-8", "replace") for (t,) in rows]


class SQLiteSource(Source):
    """A SQLite file written by the SDK's ``SQLiteSession`` or ``AdvancedSQLiteSession``."""

    kind = "sqlite"

    def __init__(self, path: str, messages_table: str | None) -> None:
        self.location = path
        if not Path(path).is_file():
            raise ConnectionFailedError(f"no such file: {path}")
        self._conn = connect_readonly(Path(path))  # importing never changes the source
        tables = {name.lower(): name for name in sqlite_tables(self._conn, path)}
        self._conn.row_factory = sqlite3.Row  # its rows are read by column name
        self.advanced = "message_structure" in tables
        if messages_table is None and self.advanced:
            # The structure table's foreign key names the messages table it belongs to.
            for key in self._conn.execute("PRAGMA foreign_key_list(message_structure)"):
                if key["from"] == "message_id":
                    messages_table = key["table"]
        messages_table = messages_table or "agent_messages"
        if messages_table.lower() not in tables:
            hint = (
                " (it is a turnstore database: copy its conversations with "
                f"`turnstore copy {path} TARGET`, which keeps everything)"
                if "turnstore_schema" in tables
                else f"; it has {', '.join(sorted(tables.values())) or 'no tables'}"
            )
            raise SchemaError(
                f"{path} holds no {messages_table!r} table of Agents SDK session messages{hint}"
            )
        self.kind = "advanced-sqlite" if self.advanced else "sqlite"
        self._messages = _quote(tables[messages_table.lower()])
        self._usage = "turn_usage" in tables
        self.last_id: int | None = None  # the messages table's last row ``load`` read

    def _query(self, sql: str, *params: Any) -> list[sqlite3.Row]:
        try:
            return self._conn.execute(sql, params).fetchall()
        except sqlite3.Error as exc:
            raise SchemaError(f"cannot read {self.location}: {exc}") from exc

    async def session_ids(self) -> list[str]:
        """Sessions in order of their first message (the rows of an id that is not UTF-8
        text are counted as skipped)."""
        rows = self._query(
            f"SELECT session_id, count(*) AS items FROM {self._messages} "
            "GROUP BY session_id ORDER BY min(id)"
        )
        ids = [row["session_id"] for row in rows]
        self.skipped = sum(row["items"] for row in rows if isinstance(row["session_id"], bytes))
        return [str(sid) for sid in ids if not isinstance(sid, bytes)]

    async def aclose(self) -> None:
        """Close the read-only connection."""
        self._conn.close()

    async def total_items(self) -> int:
        """Rows of the messages table."""
        [row] = self._query(f"SELECT count(*) AS items FROM {self._messages}")
        return int(row["items"])

    async def load(self, session_id: str) -> SourceSession:
        """One session: linear, or its branches when it has AdvancedSQLiteSession structure."""
        if self.advanced and self._query(
            "SELECT 1 FROM message_structure WHERE session_id = ? LIMIT 1", session_id
        ):
            return self._load_branches(session_id)
        rows = self._query(
            f"SELECT id, message_data, created_at FROM {self._messages} "
            "WHERE session_id = ? ORDER BY id",
            session_id,
        )
        self.last_id = rows[-1]["id"] if rows else None
        return linear_session(session_id, map(_item_row, rows))

    async def rows_after(
        self, session_id: str, after: int
    ) -> tuple[list[dict[str, Any]], int | None, set[str]]:
        """The session's items of rows after row ``after`` (those that decode), the last
        row's id, and the AdvancedSQLiteSession branches they were written to (none for
        SQLiteSession's rows)."""
        rows = self._query(
            f"SELECT id, message_data FROM {self._messages} WHERE session_id = ? AND id > ? "
            "ORDER BY id",
            session_id,
            after,
        )
        items = [item for row in rows if (item := decode_item(row["message_data"])) is not None]
        branches: set[str] = set()
        if self.advanced and rows:
            found = self._query(
                "SELECT DISTINCT branch_id FROM message_structure "
                "WHERE session_id = ? AND message_id > ?",
                session_id,
                after,
            )
            branches = {str(row["branch_id"]) for row in found}
        return items, (rows[-1]["id"] if rows else None), branches

    def _load_branches(self, session_id: str) -> SourceSession:
        # Only messages with structure rows: the ones AdvancedSQLiteSession itself returns.
        rows = self._query(
            f"""SELECT s.branch_id, s.message_id AS id, m.message_data, m.created_at,
                       s.user_turn_number
                FROM message_structure s JOIN {self._messages} m ON m.id = s.message_id
                WHERE s.session_id = ?
                ORDER BY s.sequence_number, s.id""",
            session_id,
        )
        self.last_id = max((row["id"] for row in rows), default=None)
        session = SourceSession(session_id)
        branches: dict[str, list[sqlite3.Row]] = {}  # in order of first appearance
        for row in rows:
            branches.setdefault(row["branch_id"], []).append(row)
        usage_rows = (
            self._query(
                """SELECT branch_id, user_turn_number, requests, input_tokens, output_tokens,
                      total_tokens, input_tokens_details, output_tokens_details
               FROM turn_usage WHERE session_id = ?""",
                session_id,
            )
            if self._usage
            else []
        )
        usage = {}
        for row in usage_rows:
            counted = _turn_usage(row)
            if counted is None:
                session.skipped += 1
            else:
                usage[(row["branch_id"], row["user_turn_number"])] = counted
        builder = TreeBuilder(session)
        # "main" first (the branch a new AdvancedSQLiteSession is on), then in creation order:
        # branches that share runs with it become siblings at their fork point.
        for branch in sorted(branches, key=lambda b: b != "main"):
            turns = {row["id"]: row["user_turn_number"] for row in branches[branch]}
            runs = runs_of(map(_item_row, branches[branch]), session)
            for run, keys in runs:
                run.usage = usage.get((branch, turns[keys[0]]))
            leaf = builder.add_path((run for run, _ in runs), _branch_name(branch))
            if session.head is None:
                session.head = leaf
        return session


def _branch_name(branch_id: Any) -> str | None:
    """An AdvancedSQLiteSession ``branch_id`` as a turnstore branch name, if it can be one."""
    try:
        return validate.branch_name(branch_id)
    except InvalidOperationError:
        return None


def _item_row(row: sqlite3.Row) -> SourceRow:
    """A messages table's row, keyed by its ``id``."""
    return SourceRow(row["id"], row["message_data"], row["created_at"])


def _turn_usage(row: sqlite3.Row) -> Usage | None:
    """A ``turn_usage`` row's usage, its token details whole; None if it holds something that
    is not a count."""

    def details(column: str) -> Any:
        data = row[column]
        return decode_item(data) if data is not None else None

    inputs, outputs = details("input_tokens_details"), details("output_tokens_details")
    return validate.checked_usage(
        {
            "requests": row["requests"],
            "input_tokens": row["input_tokens"],
            "output_tokens": row["output_tokens"],
            "total_tokens": row["total_tokens"],
            "cached_tokens": inputs.get("cached_tokens") if isinstance(inputs, dict) else 0,
            "reasoning_tokens": (
                outputs.get("reasoning_tokens") if isinstance(outputs, dict) else 0
            ),
            "input_tokens_details": inputs,
            "output_tokens_details": outputs,
        }
    )
