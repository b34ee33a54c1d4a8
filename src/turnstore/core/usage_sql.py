"""The statements of usage and its cost (``queries.usage``), by group: the tokens summed per
group, per group, model and UTC day for a price table to price, one name's annotations of
the group's runs, and the token details summed field by field.

Both dialects write them alike but for small tokens (``core.shared_sql``, ``core.sql``).
"""

from __future__ import annotations

from .annotation_sql import AnnotationStatsRow
from .ops import All, Statement
from .results import UsageCostRow, UsageDetailRow, UsageSumRow

__all__ = ["STATEMENTS", "USAGE", "USAGE_ANNOTATIONS", "USAGE_COST", "USAGE_DETAILS"]

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
# The annotations of one name (:name) of the same groups' runs, each under its run's group
# (by model or agent: the run's own, where usage counts the run).
USAGE_ANNOTATIONS_BY_SESSION = All("usage_annotations_by_session", row=AnnotationStatsRow)
USAGE_ANNOTATIONS_BY_USER = All("usage_annotations_by_user", row=AnnotationStatsRow)
USAGE_ANNOTATIONS_BY_DAY = All("usage_annotations_by_day", row=AnnotationStatsRow)
USAGE_ANNOTATIONS_BY_MODEL = All("usage_annotations_by_model", row=AnnotationStatsRow)
USAGE_ANNOTATIONS_BY_AGENT = All("usage_annotations_by_agent", row=AnnotationStatsRow)
USAGE_ANNOTATIONS_BY_RUN = All("usage_annotations_by_run", row=AnnotationStatsRow)
# The same groups' token details, each field summed (Store.usage(details=True)).
USAGE_DETAILS_BY_SESSION = All("usage_details_by_session", row=UsageDetailRow)
USAGE_DETAILS_BY_USER = All("usage_details_by_user", row=UsageDetailRow)
USAGE_DETAILS_BY_DAY = All("usage_details_by_day", row=UsageDetailRow)
USAGE_DETAILS_BY_MODEL = All("usage_details_by_model", row=UsageDetailRow)
USAGE_DETAILS_BY_AGENT = All("usage_details_by_agent", row=UsageDetailRow)
USAGE_DETAILS_BY_RUN = All("usage_details_by_run", row=UsageDetailRow)

GROUPS = ("session", "user", "model", "agent", "day", "run")
USAGE: dict[str, All[UsageSumRow]] = {g: globals()[f"USAGE_BY_{g.upper()}"] for g in GROUPS}
"""Each group's statement of its tokens (and runs)."""
USAGE_COST: dict[str, All[UsageCostRow]] = {
    g: globals()[f"USAGE_COST_BY_{g.upper()}"] for g in GROUPS
}
"""Each group's statement of its tokens by model and day."""
USAGE_ANNOTATIONS: dict[str, All[AnnotationStatsRow]] = {
    g: globals()[f"USAGE_ANNOTATIONS_BY_{g.upper()}"] for g in GROUPS
}
"""Each group's statement of one name's annotations of its runs."""
USAGE_DETAILS: dict[str, All[UsageDetailRow]] = {
    g: globals()[f"USAGE_DETAILS_BY_{g.upper()}"] for g in GROUPS
}
"""Each group's statement of its token details, field by field."""

STATEMENTS: tuple[Statement, ...] = tuple(
    value for value in list(globals().values()) if isinstance(value, Statement)
)
"""The usage statements, in declaration order."""
