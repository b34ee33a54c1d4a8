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
from .ops import All, Capability, Group, Op, Query, Values, supports
from .results import SearchHeadRow, SearchRow
from .search_index import copy_backlog, index_backlog
from .tables import as_datetime

__all__ = [
    "COUNT_BOUND",
    "SEARCH_ORDERS",
    "SNIPPET_MARKS",
    "WINDOW",
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
    to ``COUNT_BOUND``: the newest ``COUNT_BOUND + 1`` matches are read as a search reads
    a block, so a count costs what a few blocks do, however many items match."""
    parsed = parse_search(query)
    if not parsed:
        return SearchCount(0, exact=True)
    backlog = yield from _index(feed)
    params = {**(yield from where.params()), "fts": parsed.fts5(), "tsq": parsed.tsquery()}
    sources = [_ITEMS, _ERRORS, *([_BACKLOG] if backlog else [])]
    cap = COUNT_BOUND + 1
    firsts = yield Group([_first(source, params, cap, where) for source in sources])
    matches = 0
    for source, first in zip(sources, firsts, strict=True):
        if _headed(source, where) and _turn(first) is not None:
            # A word neither common nor rare lately: its index read in any order, to the cap.
            matches += yield Q.SEARCH_ITEM_COUNT({**params, "cap": cap})
        else:
            matches += len(_found(source, where, first))
    return SearchCount(min(matches, COUNT_BOUND), exact=matches <= COUNT_BOUND)


# How many of the newest matches a search ranks together: the matches are cut, newest
# first, into blocks of WINDOW, and each block is ranked on its own (exact phrases first,
# then by rank or by recency), so a page costs reading its blocks, however many runs match.
WINDOW = 200


@dataclass(frozen=True, slots=True)
class _Source:
    ids: Values[int]
    hits: All[SearchRow]
    tool_error: bool


_ITEMS = _Source(Q.SEARCH_ITEM_IDS, Q.SEARCH_ITEM_HITS, False)
_ERRORS = _Source(Q.SEARCH_ERROR_IDS, Q.SEARCH_ERROR_HITS, True)
_BACKLOG = _Source(Q.SEARCH_BACKLOG_IDS, Q.SEARCH_BACKLOG_HITS, False)

# Where the index cannot give the newest matches first (Capability.SEARCH_PROBE), a search
# reads the newest PROBE items backwards first (its head): their matches are the newest, and
# how many there are says how common the word is lately. From SCAN_MATCHES up (1%), the
# backward read goes on below them (a block is near: at most PROBE * WINDOW / SCAN_MATCHES
# rows); with none, the word's index is read below them (a rare word); in between, the word's
# index is read over the ids below that the head's rate says hold the rest of the block, SLACK
# times as many (through both indexes: only the matches in the range are visited), each
# further range WIDEN times the one before, until the block is whole. Measured at 1,000,000
# runs: a word in 0.5% of items costs ~60 ms read backwards, ~10 through a range; one in 5%
# ~3 backwards, ~8 through a range (its index's entries grow with the store).
PROBE = 1000
SCAN_MATCHES = 10
SLACK = 2
WIDEN = 4


def _headed(source: _Source, where: SearchFilter) -> bool:
    """Whether ``source``'s newest matches are read by SEARCH_ITEM_HEAD: the items, where the
    index cannot give them newest first, unless a backward read serves (one session's items:
    read backwards through its own index)."""
    return source is _ITEMS and where.session_id is None and supports(Capability.SEARCH_PROBE)


def _first(source: _Source, params: dict[str, Any], n: int, where: SearchFilter) -> Query:
    """The first (and mostly the only) read of the ids of the newest ``n`` matches of
    ``source``: every source's first read travels in one group."""
    if _headed(source, where):
        return Q.SEARCH_ITEM_HEAD({**params, "n": n, "probe": PROBE, "scan": SCAN_MATCHES})
    return source.ids({**params, "n": n})


def _found(source: _Source, where: SearchFilter, first: Any) -> list[int]:
    """The matches' ids that ``source``'s first read returned."""
    if not _headed(source, where):
        return list(first)
    rows: list[SearchHeadRow] = first
    return [row.id for row in rows if row.hit]


def _turn(first: list[SearchHeadRow]) -> int | None:
    """The last item of the head, where the reads below it are left to ``_newest`` (the
    word neither common nor rare lately), else None."""
    return next((row.id for row in first if row.window), None)


def _newest(
    source: _Source, params: dict[str, Any], n: int, where: SearchFilter, first: Any
) -> Op[list[int]]:
    """The ids of the newest ``n`` matches of ``source``, given what its first read
    (``_first``) returned."""
    ids = _found(source, where, first)[:n]
    turn = _turn(first) if _headed(source, where) else None
    if turn is None or len(ids) >= n:
        return ids
    width, hi = SLACK * (n - len(ids)) * PROBE // len(ids), turn - 1
    while len(ids) < n and hi > 0:
        lo = max(1, hi - width + 1)
        ids += yield Q.SEARCH_ITEM_IDS_BETWEEN({**params, "n": n - len(ids), "lo": lo, "hi": hi})
        width, hi = width * WIDEN, lo - 1
    return ids


def _among(params: dict[str, Any], ids: list[int]) -> dict[str, Any]:
    """The parameters of a statement that reads the matches ``ids``: the ids (a JSON list)
    and their range (which an index of matches can seek)."""
    return {**params, "lo": min(ids), "hi": max(ids), "ids": json.dumps(ids)}


def _hits(
    sources: list[_Source], matches: list[tuple[int, _Source]], params: dict[str, Any]
) -> dict[_Source, Query]:
    """The reads of ``matches`` (ids and their sources), a query per source that has any:
    sent together, as one group."""
    reads = {}
    for source in sources:
        if ids := [item_id for item_id, found in matches if found is source]:
            reads[source] = source.hits(_among(params, ids))
    return reads


def _result(row: SearchRow, score: SearchRow, *, exact: bool, tool_error: bool) -> SearchResult:
    """A result: ``row`` with its snippet, ``score`` with its rank (the same row, or that
    row read in its block)."""
    snippet, matches = unmark(row.snippet or "")
    return SearchResult(
        session_id=row.session_id,
        run_id=row.run_id,
        item_id=row.id,
        type=row.type,
        role=row.role,
        snippet=snippet,
        rank=float(score.rank),
        exact=exact or bool(score.exact),
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
    """Items whose text (or tool call's error) matches ``query``; the ``limit`` results
    after the first ``offset``.

    The matches are cut, newest first, into blocks of ``WINDOW``; within a block, matches
    of the query's words as one exact phrase come first, then by ``order``: ``relevance``
    (the rank, within the block: see docs/queries.md) or ``recent``. The cost is that of
    the blocks the page reaches, not of every match. ``feed=False`` (a read-only store)
    leaves the search index as it is and searches a private copy of its backlog too.
    """
    parsed = parse_search(query)
    if not parsed:
        return []
    backlog = yield from _index(feed)
    ranked = order == "relevance"
    phrase = parsed.fts5_phrase()
    every_exact = phrase is not None and phrase == parsed.fts5()  # the query is one phrase
    if every_exact:
        phrase = None
    params: dict[str, Any] = {
        **(yield from where.params()),
        "fts": parsed.fts5(),
        "tsq": parsed.tsquery(),
        "phrase_fts": phrase,
        "phrase_tsq": None if phrase is None else parsed.tsquery_phrase(),
        "ranked": ranked,
        "open": SNIPPET_MARKS[0],
        "close": SNIPPET_MARKS[1],
    }
    first = offset // WINDOW * WINDOW
    end = -(-(offset + limit) // WINDOW) * WINDOW
    sources = [_ITEMS, _ERRORS, *([_BACKLOG] if backlog else [])]
    # The newest matches of every source, merged by item id: the blocks the page reaches.
    newest: list[tuple[int, _Source]] = []
    firsts = yield Group([_first(source, params, end, where) for source in sources])
    for source, answer in zip(sources, firsts, strict=True):
        found = yield from _newest(source, params, end, where, answer)
        newest.extend((item_id, source) for item_id in found)
    newest.sort(key=lambda match: -match[0])
    blocks = newest[first:end]
    if not blocks:
        return []
    page_start, page_end = offset - first, offset - first + limit
    # Each match in order: its id, its row when its block was ranked, whether that row has
    # its snippet (its whole block lies on the page: read at once), its source.
    ordered: list[tuple[int, SearchRow | None, bool, _Source]] = []
    for start in range(0, len(blocks), WINDOW):
        block = blocks[start : start + WINDOW]
        if not ranked and phrase is None:  # newest first is the block's order already
            ordered.extend((item_id, None, False, source) for item_id, source in block)
            continue
        whole = page_start <= start and start + len(block) <= page_end
        read: list[tuple[SearchRow, _Source]] = []
        reads = _hits(sources, block, {**params, "snippets": whole})
        for source, rows in zip(reads, (yield Group(list(reads.values()))), strict=True):
            read.extend((row, source) for row in rows)
        # Exact phrases first; then by rank, a tie the older first; or newest first.
        read.sort(
            key=lambda hit: (
                (not hit[0].exact, -hit[0].rank, hit[0].id)
                if ranked
                else (not hit[0].exact, -hit[0].id)
            )
        )
        ordered.extend((row.id, row, whole, source) for row, source in read)
    page = ordered[page_start:page_end]
    unshown = [(item_id, source) for item_id, _, done, source in page if not done]
    reads = _hits(sources, unshown, {**params, "snippets": True, "ranked": False})
    snippets: dict[int, SearchRow] = {}
    if reads:
        for rows in (yield Group(list(reads.values()))):
            snippets.update((row.id, row) for row in rows)
    results = []
    for item_id, row, done, source in page:
        shown = row if done else snippets.get(item_id)
        if shown is not None:
            scored = shown if row is None else row
            results.append(_result(shown, scored, exact=every_exact, tool_error=source.tool_error))
    return results
