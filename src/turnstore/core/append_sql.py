"""The statements of an append (``core.append``) that write a batch without waiting.

A tool call's row names its items by where the append put them (run and position, unique in a
session), not by ids the item inserts would have to return: so PostgreSQL sends a batch's items
and calls without waiting for an answer between them. The ids are looked up in a ``SELECT``,
not in ``VALUES``, which Citus refuses subqueries in (the copy's insert, ``COPY_TOOL_CALL``,
finds its items the same way). Where ids are had ahead (``Capability.IDS_AHEAD``), a new
run's id comes with the session's lock, and its insert needs no answer either.
"""

from __future__ import annotations

from .ops import Capability, Execute, Insert, Statement, Value
from .tables import TOOL_CALL_FROM_ITEM

__all__ = ["STATEMENTS", "item_at"]


def item_at(item: str) -> str:
    """The id of session ``:sid``'s item at run ``:{item}_run``, position ``:{item}_position``
    (NULL when the parameters are)."""
    return f"""(SELECT id FROM items WHERE session_id = :sid AND run_id = :{item}_run
                   AND position = :{item}_position)"""


_RUN = """
        INSERT INTO runs ({id}session_id, parent_id, depth, user_message, assistant_message,
                          item_count, status, created_at, updated_at)
        VALUES ({value}:sid, :parent_id, :depth, :user_message, :assistant_message,
                :item_count, :status, :now, :now)"""
INSERT_RUN = Insert("insert_run", _RUN.format(id="", value=""))
# A run whose id was had ahead (NEXT_RUN_ID).
STORE_RUN = Execute("store_run", _RUN.format(id="id, ", value=":id, "))
NEXT_RUN_ID = Value("next_run_id", needs=Capability.IDS_AHEAD, column="id", holds=int)
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
