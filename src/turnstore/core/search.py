"""Full-text search: the query language, rendered for each backend's index, and the search.

A query is words, "quoted phrases" and -negations; ``parse_search`` turns it into what FTS5's
MATCH and PostgreSQL's ``to_tsquery`` take. The backends mark each match in a snippet with
``SNIPPET_MARKS``, which ``unmark`` turns into offsets.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ..domain.model import SearchCount, SearchResult
from ..domain.turns import BranchRef
from . import search_sql as Q
from . import turns
from .ops import Op
from .results import SearchRow
from .search_index import copy_backlog, index_backlog
from .tables import as_datetime

__all__ = [
    "COUNT_BOUND",
    "SEARCH_ORDERS",
    "SNIPPET_MARKS",
    "SearchFilter",
    "SearchOrder",
    "SearchQuery",
    "parse_search",
    "search",
    "search_count",
    "unmark",
]

SearchOrder = Literal["relevance", "recent"]
SEARCH_ORDERS: tuple[SearchOrder, ...] = ("relevance", "recent")


# A term of the query language, after the optional "-" of a negation: a quoted phrase (the
# closing quote may be missing), or a run of anything but space.
_TERM = re.compile(r'(-?)(?:"([^"]*)"?|(\S+))')


@dataclass(frozen=True, slots=True)
class _Term:
    text: str
    prefix: bool = False


@dataclass(frozen=True, slots=True)
class SearchQuery:
    """A parsed search: groups of alternatives (all groups must match), and exclusions.

    The language is a web-search one: words (all must occur), ``"exact phrase"``, ``a OR b``,
    ``-word`` (exclude), ``word*`` (prefix). Anything else, including characters that are
    operators to the engine, is plain text: a query never raises a syntax error. Every term
    is rendered as a quoted string, so the engine never reads user text as syntax.
    """

    groups: tuple[tuple[_Term, ...], ...]
    excluded: tuple[_Term, ...]

    def __bool__(self) -> bool:
        return bool(self.groups)

    @property
    def phrase(self) -> str | None:
        """The query's words as one phrase (exact matches rank first), if that differs."""
        if any(len(group) > 1 for group in self.groups):
            return None
        terms = [group[0] for group in self.groups]
        words = " ".join(term.text for term in terms)
        if len(words.split()) < 2 or any(term.prefix for term in terms):
            return None
        return words

    @staticmethod
    def _fts5_term(term: _Term) -> str:
        quoted = '"' + term.text.replace('"', '""') + '"'
        return quoted + " *" if term.prefix else quoted

    def _fts5(self, groups: Sequence[Sequence[_Term]]) -> str:
        parts = []
        for group in groups:
            alternatives = " OR ".join(self._fts5_term(term) for term in group)
            parts.append(f"({alternatives})" if len(group) > 1 else alternatives)
        expression = " AND ".join(parts)
        for term in self.excluded:
            expression = f"({expression}) NOT {self._fts5_term(term)}"
        return expression

    def fts5(self) -> str:
        """The query in SQLite FTS5 syntax."""
        return self._fts5(self.groups)

    def fts5_phrase(self) -> str | None:
        """The exact-phrase query in FTS5 syntax, or None."""
        phrase = self.phrase
        return None if phrase is None else self._fts5([[_Term(phrase)]])

    @staticmethod
    def _ts_term(term: _Term) -> str:
        # A quoted tsquery lexeme: to_tsquery normalises it with the text-search config and
        # splits it into a phrase (<->) where the parser sees several words.
        quoted = "'" + term.text.replace("\\", "\\\\").replace("'", "''") + "'"
        return quoted + ":*" if term.prefix else quoted

    def _tsquery(self, groups: Sequence[Sequence[_Term]]) -> str:
        parts = []
        for group in groups:
            alternatives = " | ".join(self._ts_term(term) for term in group)
            parts.append(f"({alternatives})" if len(group) > 1 else alternatives)
        parts.extend(f"!{self._ts_term(term)}" for term in self.excluded)
        return " & ".join(parts)

    def tsquery(self) -> str:
        """The query in PostgreSQL ``to_tsquery`` syntax."""
        return self._tsquery(self.groups)

    def tsquery_phrase(self) -> str | None:
        """The exact-phrase query in ``to_tsquery`` syntax, or None."""
        phrase = self.phrase
        return None if phrase is None else self._tsquery([[_Term(phrase)]])


def _searchable(text: str) -> bool:
    # Engines index letters and digits only; a term without any matches nothing, and as an
    # empty phrase it would make every AND fail.
    return any(ch.isalnum() for ch in text)


def parse_search(text: str) -> SearchQuery:
    """Parse a user's search text (see ``SearchQuery``); never raises for a str."""
    groups: list[list[_Term]] = []
    excluded: list[_Term] = []
    join_next = False
    for match in _TERM.finditer(text):
        # A match is a phrase or a word (never empty): no word where it is a phrase.
        negate, phrase, word = match.group(1), match.group(2), match.group(3) or ""
        if word == "OR" and not negate:
            join_next = bool(groups)
            continue
        if phrase is not None:
            term = _Term(" ".join(phrase.split()))
        else:
            prefix = word.endswith("*") and _searchable(word)
            term = _Term(word.rstrip("*") if prefix else word, prefix=prefix)
        if not _searchable(term.text):
            join_next = False
            continue
        if negate:
            excluded.append(term)
        elif join_next:
            groups[-1].append(term)
        else:
            groups.append([term])
        join_next = False
    return SearchQuery(tuple(tuple(group) for group in groups), tuple(excluded))


# What the backends' snippet functions (FTS5 snippet(), ts_headline) put around each match;
# ``search`` takes them out again and returns the matches as offsets. Two Unicode
# noncharacters, which are for a program's internal use: the text columns never hold them
# (items.clean_text replaces them), so a mark in a snippet is always one of these.
SNIPPET_MARKS = ("\ufdd0", "\ufdd1")
_MARK_SPLIT = re.compile(f"([{SNIPPET_MARKS[0]}{SNIPPET_MARKS[1]}])")


def unmark(marked: str) -> tuple[str, tuple[tuple[int, int], ...]]:
    """A snippet with ``SNIPPET_MARKS`` as its text and the ``(start, end)`` offsets of the
    marked matches in it. A mark without its partner marks nothing."""
    opening, closing = SNIPPET_MARKS
    texts: list[str] = []
    spans: list[tuple[int, int]] = []
    position = 0
    start: int | None = None
    for piece in _MARK_SPLIT.split(marked):
        if piece == opening:
            start = position
        elif piece == closing:
            if start is not None and position > start:
                spans.append((start, position))
            start = None
        elif piece:
            texts.append(piece)
            position += len(piece)
    return "".join(texts), tuple(spans)


@dataclass(frozen=True, slots=True)
class SearchFilter:
    """Which items a search looks at: every branch of every session unless narrowed to a
    session, a user's sessions, the runs of an agent or a model, a time range (``since``
    inclusive, ``until`` exclusive, as the backend binds times), roles and item types, and
    the path of one ``branch`` of the session (a name or a run id)."""

    session_id: str | None = None
    user_id: str | None = None
    agent: str | None = None
    model: str | None = None
    since: Any = None
    until: Any = None
    roles: Sequence[str] | None = None
    types: Sequence[str] | None = None
    branch: BranchRef | None = None

    def params(self) -> Op[dict[str, Any]]:
        """The filters as the statements of ``core.search_sql`` bind them (a branch: the runs
        of its path, read in the search's transaction)."""
        run_ids = None
        if self.branch is not None and self.session_id is not None:
            run_ids = yield from turns.branch_run_ids(self.session_id, self.branch)
        return {
            "run_ids": run_ids,
            "sid": self.session_id,
            "uid": self.user_id,
            "agent": self.agent,
            "model": self.model,
            "since": self.since,
            "until": self.until,
            "roles": json.dumps(list(self.roles)) if self.roles is not None else None,
            "types": json.dumps(list(self.types)) if self.types is not None else None,
            "exclude": "[]",
        }


# How far a search's count goes: beyond it, "more than COUNT_BOUND" (counting every match of
# a common word would cost as much as ranking them all).
COUNT_BOUND = 1000


def _index(feed: bool) -> Op[bool]:
    """Bring the search index up to date (a store that may write) or copy its backlog
    (one that must not); True when a backlog copy must be searched too."""
    if feed:
        yield from index_backlog()
        return False
    return (yield from copy_backlog())


def search_count(query: str, *, where: SearchFilter, feed: bool) -> Op[SearchCount]:
    """How many items match ``query`` (in their text or their tool call's error), counted up
    to ``COUNT_BOUND``."""
    parsed = parse_search(query)
    if not parsed:
        return SearchCount(0, exact=True)
    backlog = yield from _index(feed)
    params = {
        **(yield from where.params()),
        "fts": parsed.fts5(),
        "tsq": parsed.tsquery(),
        "cap": COUNT_BOUND + 1,
    }
    matches = yield Q.COUNT_MATCHES(params)
    if backlog and matches <= COUNT_BOUND:
        matches += yield Q.COUNT_BACKLOG_MATCHES(params)
    return SearchCount(min(matches, COUNT_BOUND), exact=matches <= COUNT_BOUND)


def _result(row: SearchRow, *, exact: bool, tool_error: bool) -> SearchResult:
    snippet, matches = unmark(row.snippet or "")
    return SearchResult(
        session_id=row.session_id,
        run_id=row.run_id,
        item_id=row.id,
        type=row.type,
        role=row.role,
        snippet=snippet,
        rank=float(row.rank),
        exact=exact,
        created_at=as_datetime(row.created_at),
        matches=matches,
        tool_error=tool_error,
    )


def search(
    query: str,
    *,
    where: SearchFilter,
    limit: int,
    offset: int,
    order: SearchOrder,
    feed: bool,
) -> Op[list[SearchResult]]:
    """Items whose text (or tool call's error) matches ``query``: exact-phrase matches first,
    then by ``order``; the ``limit`` results after the first ``offset``.

    ``relevance`` ranks every match (its cost grows with the number of matching items);
    ``recent`` takes the newest matches, at a cost that does not. ``feed=False`` (a read-only
    store) leaves the search index as it is and searches a private copy of its backlog too.
    """
    parsed = parse_search(query)
    if not parsed:
        return []
    backlog = yield from _index(feed)
    wanted = offset + limit
    results: list[SearchResult] = []
    tiers: list[tuple[str | None, str | None, bool]] = [
        (parsed.fts5_phrase(), parsed.tsquery_phrase(), True),
        (parsed.fts5(), parsed.tsquery(), False),
    ]
    if tiers[0][0] == tiers[1][0]:
        del tiers[1]  # the query is itself one exact phrase
    recent = order == "recent"
    sources = [
        (Q.SEARCH_RECENT if recent else Q.SEARCH, False),
        (Q.SEARCH_ERRORS_RECENT if recent else Q.SEARCH_ERRORS, True),
    ]
    if backlog:
        sources.append((Q.SEARCH_RECENT_BACKLOG if recent else Q.SEARCH_BACKLOG, False))
    filters = yield from where.params()
    for fts, tsq, exact in tiers:
        if fts is None or len(results) >= wanted:
            continue
        params = {
            **filters,
            "open": SNIPPET_MARKS[0],
            "close": SNIPPET_MARKS[1],
            "fts": fts,
            "tsq": tsq,
            "exclude": json.dumps([str(result.item_id) for result in results]),
            "limit": wanted - len(results),
        }
        found: list[tuple[SearchRow, bool]] = []
        for statement, tool_error in sources:
            found.extend((row, tool_error) for row in (yield statement(params)))
        # The statements' own order, across them: rank (negated) first, else newest first.
        found.sort(key=lambda hit: -hit[0].id if recent else (-hit[0].rank, hit[0].id))
        seen = {result.item_id for result in results}
        for row, tool_error in found:
            if row.id not in seen and len(results) < wanted:
                seen.add(row.id)
                results.append(_result(row, exact=exact, tool_error=tool_error))
    return results[offset:]
