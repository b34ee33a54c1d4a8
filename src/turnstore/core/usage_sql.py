"""The statements of usage and its cost (``queries.usage``), by group: the tokens summed per
group, and per group, model and UTC day for a price table to price.

Both dialects write them alike but for small tokens (``core.shared_sql``, ``core.sql``).
"""

from __future__ import annotations

from .ops import All, Statement
from .results import UsageCostRow, UsageSumRow

__all__ = ["STATEMENTS", "USAGE", "USAGE_COST"]

# Token usage per group.
USAGE_BY_SESSION = All("usage_by_session", row=UsageSumRow)
USAGE_BY_USER = All("usage_by_user", row=UsageSumRow)
USAGE_BY_DAY = All("usage_by_day", row=UsageSumRow)
USAGE_BY_MODEL = All("usage_by_model", row=UsageSumRow)
USAGE_BY_AGENT = All("usage_by_agent", row=UsageSumRow)
USAGE_BY_RUN = All("usage_by_run", row=UsageSumRow)
# The same groups' tokens by model and day, to be priced.
USAGE_COST_BY_SESSION = All("usage_cost_by_session", row=UsageCostRow)
USAGE_COST_BY_USER = All("usage_cost_by_user", row=UsageCostRow)
USAGE_COST_BY_DAY = All("usage_cost_by_day", row=UsageCostRow)
USAGE_COST_BY_MODEL = All("usage_cost_by_model", row=UsageCostRow)
USAGE_COST_BY_AGENT = All("usage_cost_by_agent", row=UsageCostRow)
USAGE_COST_BY_RUN = All("usage_cost_by_run", row=UsageCostRow)

GROUPS = ("session", "user", "model", "agent", "day", "run")
USAGE: dict[str, All[UsageSumRow]] = {g: globals()[f"USAGE_BY_{g.upper()}"] for g in GROUPS}
"""Each group's statement of its tokens (and runs)."""
USAGE_COST: dict[str, All[UsageCostRow]] = {
    g: globals()[f"USAGE_COST_BY_{g.upper()}"] for g in GROUPS
}
"""Each group's statement of its tokens by model and day."""

STATEMENTS: tuple[Statement, ...] = tuple(
    value for value in list(globals().values()) if isinstance(value, Statement)
)
"""The usage statements, in declaration order."""
