"""What differs between SQL dialects inside a statement both write alike.

A statement whose text differs between SQLite and PostgreSQL only in small tokens (a cast
that types an optional parameter, how a JSON list is unnested, how a long key is looked up)
is written once, in ``core.shared_sql``, against a ``Syntax``; each backend's ``sql`` module
holds its one ``Syntax`` and writes only the statements that differ in shape.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["Syntax"]


@dataclass(frozen=True)
class Syntax:
    """A dialect's spelling of the tokens shared statements leave open."""

    casts: bool
    """Whether an optional parameter is cast to its type (PostgreSQL cannot infer the type of
    a parameter that is only ever compared with NULL)."""
    scoped: bool
    """Whether every table a statement touches is filtered by ``session_id`` even where the
    row's key already finds it (PostgreSQL: so that a distributed table stays on one shard)."""
    true: str
    """A condition that always holds."""
    same: str
    """Equality that holds between two NULLs (``IS`` / ``IS NOT DISTINCT FROM``)."""
    day: Callable[[str], str]
    """The UTC day of a timestamp column, as ``YYYY-MM-DD`` text."""
    values: Callable[[str], str]
    """The elements of a JSON array parameter (``:name``), as a subquery's text rows."""
    key_is: Callable[[str, str], str]
    """``column = :param`` for a long text key, as the dialect's indexes serve it."""
    greatest: str
    """The function giving the greatest of its arguments."""
    least: str
    """The function giving the least of its arguments."""
    json_members: str
    """The function giving a JSON object's members as rows (``key``, ``value``)."""
    json_object: str
    """The aggregate building a JSON object of (name, value) rows."""
    json_count: Callable[[str], str]
    """Whether the member ``alias`` (a row of ``json_members``) holds an integer."""
    indexed_by: Callable[[str], str]
    """The planner told to read a table through the index named (SQLite's ``INDEXED BY``,
    where its planner, without statistics, would pick a wider one); nothing elsewhere."""
    capped_sum: Callable[[str], str]
    """The sum of an integer column over a group (0 for none), capped at the largest integer
    the dialect stores rather than failing (a run's tokens stop there too)."""

    def param(self, name: str, sql_type: str) -> str:
        """The parameter ``:name``, cast to ``sql_type`` where the dialect needs it typed."""
        return f":{name}::{sql_type}" if self.casts else f":{name}"

    def optional(self, name: str, sql_type: str, condition: str) -> str:
        """``condition`` where the parameter ``name`` is given, true where it is NULL."""
        return f"({self.param(name, sql_type)} IS NULL OR {condition})"

    def session(self, alias: str = "") -> str:
        """``alias.session_id = :sid AND`` where the dialect scopes every table, else nothing."""
        prefix = f"{alias}." if alias else ""
        return f"{prefix}session_id = :sid AND " if self.scoped else ""

    def joined(self, left: str, right: str) -> str:
        """``left.session_id = right.session_id AND`` where the dialect scopes every table."""
        return f"{left}.session_id = {right}.session_id AND " if self.scoped else ""
