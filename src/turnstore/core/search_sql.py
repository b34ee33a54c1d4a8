"""The SQL of search (``core.search``), declared once: its statements and their filters.

Each dialect's ``sql`` module writes how a statement matches and ranks (FTS5's MATCH and
bm25, PostgreSQL's ``@@`` and ``ts_rank_cd``); the filters on the matching item are the same
on both and written here, against the dialect's ``Syntax``. Tool-call errors are searched
apart from the items' text (an index of their own: ``tool_errors_fts`` on SQLite, an
expression index on PostgreSQL): a hit in an error is the tool call's output item (its call
item where it has no output), and only errors that are not already that item's text are
indexed.
"""

from __future__ import annotations

from .ops import All, Capability, Statement, Value
from .results import SearchRow
from .syntax import Syntax

__all__ = ["STATEMENTS", "error_item", "search_filters"]

# By relevance or newest first; the "_BACKLOG" variants search the private copy of the
# backlog that a read-only store makes (search_index.copy_backlog), the "_ERRORS" ones the
# tool calls' errors.
SEARCH = All("search", row=SearchRow)
SEARCH_RECENT = All("search_recent", row=SearchRow)
SEARCH_BACKLOG = All("search_backlog", needs=Capability.SEARCH_BACKLOG, row=SearchRow)
SEARCH_RECENT_BACKLOG = All("search_recent_backlog", needs=Capability.SEARCH_BACKLOG, row=SearchRow)
SEARCH_ERRORS = All("search_errors", row=SearchRow)
SEARCH_ERRORS_RECENT = All("search_errors_recent", row=SearchRow)
# How many items match, counted up to :cap (a count costs what a page does): in the index
# and in tool errors, and in a read-only store's backlog copy.
COUNT_MATCHES = Value("count_matches", column="matches", holds=int)
COUNT_BACKLOG_MATCHES = Value(
    "count_backlog_matches", needs=Capability.SEARCH_BACKLOG, column="matches", holds=int
)

STATEMENTS: tuple[Statement, ...] = (
    SEARCH,
    SEARCH_RECENT,
    SEARCH_BACKLOG,
    SEARCH_RECENT_BACKLOG,
    SEARCH_ERRORS,
    SEARCH_ERRORS_RECENT,
    COUNT_MATCHES,
    COUNT_BACKLOG_MATCHES,
)


def error_item(calls: str = "t") -> str:
    """The item a tool call's error is found as: its output item, else its call item."""
    return f"coalesce({calls}.output_item_id, {calls}.call_item_id)"


def search_filters(syntax: Syntax, item: str = "i") -> str:
    """The conditions a matching item (alias ``item``) must meet: the search's filters
    (session, user, agent, model, time range, roles, types, the runs of a branch's path:
    ``:run_ids``) and not already found (``:exclude``; both JSON lists of ids as strings: one
    type on every dialect)."""
    runs = (
        f"EXISTS (SELECT 1 FROM runs r WHERE {syntax.joined('r', item)}r.id = {item}.run_id"
        f" AND {syntax.optional('agent', 'text', 'r.agent_name = :agent')}"
        f" AND {syntax.optional('model', 'text', 'r.model = :model')})"
    )
    return f"""
          AND {syntax.optional("sid", "text", f"{item}.session_id = :sid")}
          AND {
        syntax.optional(
            "uid",
            "text",
            f"EXISTS (SELECT 1 FROM sessions s WHERE s.session_id = {item}.session_id"
            " AND s.user_id = :uid)",
        )
    }
          AND (({syntax.param("agent", "text")} IS NULL AND {syntax.param("model", "text")} IS NULL)
               OR {runs})
          AND {syntax.optional("since", "timestamptz", f"{item}.created_at >= :since")}
          AND {syntax.optional("until", "timestamptz", f"{item}.created_at < :until")}
          AND {syntax.optional("roles", "text", f"{item}.role IN ({syntax.values('roles')})")}
          AND {syntax.optional("types", "text", f"{item}.type IN ({syntax.values('types')})")}
          AND {
        syntax.optional(
            "run_ids", "text", f"CAST({item}.run_id AS TEXT) IN ({syntax.values('run_ids')})"
        )
    }
          AND CAST({item}.id AS TEXT) NOT IN ({syntax.values("exclude")})"""
