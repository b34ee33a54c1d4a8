"""The statements of an append (``core.append``) that find the batch's items by place.

A tool call's row names its items by where the append put them (run and position, unique in a
session), not by ids the item inserts would have to return: so PostgreSQL sends a batch's items
and calls without waiting for an answer between them. The ids are looked up in a ``SELECT``,
not in ``VALUES``, which Citus refuses subqueries in (the copy's insert, ``COPY_TOOL_CALL``,
finds its items the same way).
"""

from __future__ import annotations

from .ops import Execute, Statement
from .tables import TOOL_CALL_FROM_ITEM

__all__ = ["STATEMENTS", "item_at"]


def item_at(item: str) -> str:
    """The id of session ``:sid``'s item at run ``:{item}_run``, position ``:{item}_position``
    (NULL when the parameters are)."""
    return f"""(SELECT id FROM items WHERE session_id = :sid AND run_id = :{item}_run
                   AND position = :{item}_position)"""


INSERT_TOOL_CALL = Execute(
    "insert_tool_call",
    f"""
        INSERT INTO tool_calls (session_id, run_id, {", ".join(TOOL_CALL_FROM_ITEM)}, output,
                                status, error, call_item_id, output_item_id, created_at,
                                completed_at)
        SELECT :sid, :run_id, {", ".join(":" + name for name in TOOL_CALL_FROM_ITEM)},
               :output, :status, :error, {item_at("call_item")}, {item_at("output_item")},
               :now, :completed_at""",
)
COMPLETE_TOOL_CALL = Execute(
    "complete_tool_call",
    f"""
        UPDATE tool_calls SET output = :output, status = :status, error = :error,
            output_item_id = {item_at("output_item")}, completed_at = :now
        WHERE session_id = :sid AND id = :id""",
)

STATEMENTS: tuple[Statement, ...] = tuple(
    value for value in list(globals().values()) if isinstance(value, Statement)
)
"""The append's statements, in declaration order."""
