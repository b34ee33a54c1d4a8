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

from .ops import All, Capability, Statement, Value, Values
from .results import SearchHeadRow, SearchRow
from .syntax import Syntax

__all__ = ["STATEMENTS", "error_item", "search_filters"]

# A search reads each source of matches (the items' index, the tool calls' errors, and a
# read-only store's private copy of the backlog: search_index.copy_backlog) in steps bounded
# by the page: "_IDS" the newest :n matching item ids; "_HITS" the matches of :ids (a JSON
# list; :lo..:hi their range, where an index of matches can seek it: they are all the
# source's matches in it) with their rank (when :ranked, over those rows), whether they hold
# the exact phrase (:phrase_fts / :phrase_tsq, NULL for none) and their snippets (when
# :snippets): a block ranked, then its page's snippets, or both at once when they are one.
SEARCH_ITEM_IDS = Values("search_item_ids", column="id", holds=int)
SEARCH_ITEM_HITS = All("search_item_hits", row=SearchRow)
SEARCH_ERROR_IDS = Values("search_error_ids", column="id", holds=int)
SEARCH_ERROR_HITS = All("search_error_hits", row=SearchRow)
SEARCH_BACKLOG_IDS = Values(
    "search_backlog_ids", needs=Capability.SEARCH_BACKLOG, column="id", holds=int
)
SEARCH_BACKLOG_HITS = All("search_backlog_hits", needs=Capability.SEARCH_BACKLOG, row=SearchRow)
# Where the index cannot give the newest matches first (Capability.SEARCH_PROBE): the
# "head", the newest :probe items read backwards, filters and all: their matches (``hit``),
# newest first, up to :n, and the last of those items when the read reached it; below it, when
# :scan or more of them matched, the newest matches read on backwards, and when none did,
# through the word's index; else the last item is flagged ``window`` (the word is neither:
# search.py reads below it by SEARCH_ITEM_IDS_BETWEEN). One statement: the read below is
# chosen by the head's result, in the server; planned for the word at every call (a plan
# made for no word in particular may read a common word's whole index to walk back a block).
SEARCH_ITEM_HEAD = All(
    "search_item_head", needs=Capability.SEARCH_PROBE, replan=True, row=SearchHeadRow
)
# How many items match, in any order, up to :cap (a word not common lately).
SEARCH_ITEM_COUNT = Value(
    "search_item_count", needs=Capability.SEARCH_PROBE, column="matches", holds=int
)
# The newest :n matches with ids in :lo..:hi, read through the word's index (planned for the
# values: a narrow range is read through both indexes, the word's and the ids').
SEARCH_ITEM_IDS_BETWEEN = Values(
    "search_item_ids_between", needs=Capability.SEARCH_PROBE, replan=True, column="id", holds=int
)

STATEMENTS: tuple[Statement, ...] = (
    SEARCH_ITEM_IDS,
    SEARCH_ITEM_HEAD,
    SEARCH_ITEM_IDS_BETWEEN,
    SEARCH_ITEM_COUNT,
    SEARCH_ITEM_HITS,
    SEARCH_ERROR_IDS,
    SEARCH_ERROR_HITS,
    SEARCH_BACKLOG_IDS,
    SEARCH_BACKLOG_HITS,
)


def error_item(calls: str = "t") -> str:
    """The item a tool call's error is found as: its output item, else its call item."""
    return f"coalesce({calls}.output_item_id, {calls}.call_item_id)"


def search_filters(syntax: Syntax, item: str = "i") -> str:
    """The conditions a matching item (alias ``item``) must meet: the search's filters
    (session, user, agent, model, time range, roles, types, the runs of a branch's path:
    ``:run_ids``, a JSON list of ids as strings: one type on every dialect)."""
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
    }"""
