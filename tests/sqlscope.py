"""What Citus requires of a statement, read from its text: the rules of tests/test_sql_scope.py
(the library's statements) and tests/test_docs_sql.py (the documented queries).

Citus distributes turnstore's tables by ``session_id`` (docs/scaling.md). It routes a statement
to one node only when it can see, for every distributed table the statement reads or writes,
that the table's ``session_id`` equals one value: a join with a table that is filtered is not
enough inside a subquery (``FOR UPDATE`` and recursive CTEs are then refused outright). Between
distributed tables it plans only joins on ``session_id`` (others need repartitioning, which it
refuses). So:

- ``unfiltered(sql, value)``: the references to distributed tables whose own scope (the
  enclosing parenthesis, subqueries cut out) has no ``session_id = value`` condition that
  must hold (not inside an OR);
- ``uncolocated(sql)``: in a statement that reads more than one distributed table, the
  references neither filtered by a session value nor joined to another on ``session_id``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# The tables distributed by session_id (docs/scaling.md); the schema version table is a
# reference table, and the views join the tables below on session_id.
DISTRIBUTED = (
    "sessions", "runs", "items", "tool_calls", "model_responses", "operations", "spans",
    "branch_names", "annotations",
)  # fmt: skip

# Statements that are about the whole store by design, not about one session: on Citus they
# fan out to every shard (docs/scaling.md lists them). An optional session filter
# (``:sid IS NULL OR session_id = :sid``) does not make a statement per-session.
CROSS_SESSION = {
    "run": "a run by id alone, whatever its session (Store.run: deep links)",
    "tool_call": "a tool call by row id alone (Store.tool_call: deep links)",
    "session_of_run": "the session of a run by id alone, so that run_id= filters read one session",
    "index_pending": "whether the store-wide search index lacks items (SQLite)",
    "index_backlog": "feeds the store-wide search index the items it lacks (SQLite)",
    "mark_indexed": "records how far the store-wide search index reaches (SQLite)",
    "copy_backlog": "a read-only store's private copy of what the search index lacks (SQLite)",
    **{
        f"sessions_by_{order}{user}": f"the session catalogue{of}, by {order.replace('_', ' ')}"
        for order in ("created_at", "updated_at", "runs", "tokens", "tool_calls", "failures")
        for user, of in (("", ""), ("_user", " of one user"))
    },
    "count_sessions": "how many sessions the catalogue's filters keep",
    "count_sessions_user": "how many of one user's sessions the catalogue's filters keep",
    "model_responses_by_all": "model responses across the store (analytics)",
    "session_summaries": "the summaries of a catalogue page's sessions, by a list of ids",
    "slowest_spans_by_all": "the slowest trace spans across the store (analytics)",
    "error_spans_by_all": "the failed trace spans across the store (analytics)",
    "items_per_session": "how many items each session holds (turnstore copy's progress)",
    **{
        f"{family}_by_{driver}": f"{family.replace('_', ' ')} across sessions (analytics)"
        for family in ("tool_calls", "slowest_tool_calls", "tool_stats")
        for driver in ("tool", "all")
    },
    **{
        f"usage_by_{key}": f"token usage per {key}, across sessions (analytics)"
        for key in ("session", "user", "day", "model", "agent", "run")
    },
    **{
        f"usage_cost_by_{key}": f"tokens to price per {key}, by model and day, across sessions"
        for key in ("session", "user", "day", "model", "agent", "run")
    },
    **{
        f"usage_annotations_by_{key}": f"one name's annotations per {key}, across sessions"
        for key in ("session", "user", "day", "model", "agent", "run")
    },
    **{
        f"usage_details_by_{key}": f"token details per {key}, field by field, across sessions"
        for key in ("session", "user", "day", "model", "agent", "run")
    },
    "session_of_annotation": "the session of an annotation by id alone (update, delete)",
    "annotations_by_name": "annotations of one name across sessions (analytics)",
    "annotations_by_all": "annotations across sessions (analytics)",
    **{
        f"annotation_stats_by_{key}": f"annotation statistics per {key}, across sessions"
        for key in ("agent", "model", "tool", "day", "run", "session", "user")
    },
    "dataset_runs": "the runs a dataset selects, across sessions (Store.dataset)",
    "search_item_ids": "full-text search across sessions, one optionally: the newest matches",
    "search_item_hits": "full-text search across sessions: matches ranked, with snippets",
    "search_item_head": "full-text search across sessions: the newest items, then below",
    "search_item_count": "how many items a search matches, up to a bound",
    "search_item_ids_between": "full-text search across sessions: the newest matches in a range",
    "search_error_ids": "full-text search of tool calls' errors across sessions: the newest",
    "search_error_hits": "full-text search of tool calls' errors: a page's snippets",
}

# How the library's statements name their session (rendered for psycopg); and any one value,
# as the docs and the tests' SQL name it (a literal, or a parameter of either backend).
SESSION_PARAMETER = r"%\(sid\)s"
SESSION_VALUE = r"(?:'[^']*'|%\(\w+\)s|:\w+)"

_TABLE_REF = re.compile(
    r"\b(from|join|update|into|delete\s+from)\s+(" + "|".join(DISTRIBUTED) + r")\b"
    r"(?:\s+(?:as\s+)?([a-z_][a-z0-9_]*))?",
    re.IGNORECASE,
)
_NOT_ALIASES = {
    "where", "on", "join", "left", "right", "inner", "cross", "set", "order", "group", "limit",
    "using", "values", "natural", "full", "union", "returning", "having", "lateral", "for",
}  # fmt: skip


@dataclass(frozen=True)
class Ref:
    """One reference to a distributed table: ``keyword table [alias]`` at ``start``."""

    keyword: str
    table: str
    alias: str
    start: int

    @property
    def name(self) -> str:
        """How the statement qualifies the table's columns."""
        return self.alias or self.table

    def __str__(self) -> str:
        return f"{self.table} {self.alias}".strip()


def refs(sql: str) -> list[Ref]:
    """The references to distributed tables in ``sql``."""
    found = []
    for match in _TABLE_REF.finditer(sql):
        alias = (match.group(3) or "").lower()
        found.append(
            Ref(
                match.group(1).lower().split()[0],
                match.group(2).lower(),
                "" if alias in _NOT_ALIASES else alias,
                match.start(),
            )
        )
    return found


def _groups(sql: str) -> list[tuple[int, int]]:
    """(start, end) of each balanced parenthesis group, end exclusive; quotes are skipped, and
    so are psycopg's placeholders, %(name)s."""
    groups: list[tuple[int, int]] = []
    stack: list[int | None] = []
    quoted = False
    for position, char in enumerate(sql):
        if char == "'":
            quoted = not quoted
        elif quoted:
            continue
        elif char == "(":
            stack.append(None if sql[position - 1 : position] == "%" else position)
        elif char == ")" and stack and (start := stack.pop()) is not None:
            groups.append((start, position + 1))
    return groups


def scope(sql: str, position: int) -> str:
    """The text of the query level around ``position``: its innermost parenthesis (or the
    whole statement), with every parenthesis inside blanked out (subqueries, and conditions
    grouped under an OR, which need not hold)."""
    groups = _groups(sql)
    enclosing = [(a, b) for a, b in groups if a < position < b]
    start, end = max(enclosing) if enclosing else (-1, len(sql) + 1)
    text = list(sql[start + 1 : end - 1])
    for a, b in groups:
        if start < a and b < end:
            for i in range(a - start, b - start - 2):
                text[i] = " "
    return "".join(text)


def is_filtered(sql: str, ref: Ref, value: str) -> bool:
    """Whether ``ref``'s own scope says its ``session_id`` equals ``value``."""
    text = scope(sql, ref.start)
    column = (
        rf"\b{ref.name}\.session_id" if ref.alias else rf"(?<![\w.])(?:{ref.table}\.)?session_id"
    )
    return re.search(rf"{column}\s*=\s*{value}(?!\w)", text, re.I) is not None


def unfiltered(sql: str, value: str = SESSION_PARAMETER) -> list[str]:
    """The references to distributed tables not filtered by ``session_id = value``."""
    missing = []
    for ref in refs(sql):
        if ref.keyword == "into":  # an INSERT writes the column
            columns = sql[ref.start : sql.index(")", ref.start)]
            if "session_id" not in columns:
                missing.append(f"INSERT INTO {ref.table}")
        elif not is_filtered(sql, ref, value):
            missing.append(str(ref))
    return missing


def _joined_on_session(sql: str, ref: Ref) -> bool:
    own = rf"\b{ref.name}\.session_id"
    other = r"\b\w+\.session_id"
    return (
        re.search(rf"{own}\s*=\s*{other}|{other}\s*=\s*{own}", sql, re.I) is not None
        # A semi-join on session_id: session_id IN (SELECT session_id FROM ...).
        or re.search(r"session_id\s+IN\s*\(\s*SELECT\s+(?:\w+\.)?session_id\b", sql, re.I)
        is not None
        or re.search(rf"\b{ref.table}\s+(?:{ref.alias}\s+)?USING\s*\(\s*session_id\b", sql, re.I)
        is not None
    )


def uncolocated(sql: str, value: str = SESSION_VALUE) -> list[str]:
    """The references that a statement reading several distributed tables (or a recursive
    one: Citus plans recursive CTEs on one node only) neither filters by ``session_id =
    value`` nor joins to another on ``session_id``."""
    found = [ref for ref in refs(sql) if ref.keyword != "into"]
    recursive = re.search(r"\bWITH\s+RECURSIVE\b", sql, re.I) is not None
    if len(found) < 2 and not recursive:
        return []
    return [
        str(ref)
        for ref in found
        if not is_filtered(sql, ref, value) and (recursive or not _joined_on_session(sql, ref))
    ]
