"""A tool call's status and error: the one home of every rule that decides them.

Pure: no I/O, no other turnstore module. Whoever decides or reads a tool call's status or
error calls these: ``items`` (an item's own error), ``core.plan`` (an append's calls and
outputs), ``turnstore.tracing`` (a function span's outcome), ``model`` (``ToolCall.failed``)
and the SQL that filters and counts failed calls (``failed_sql``). Changing how an error is
extracted changes this module (and, for rows already stored, adds a backfill migration).
"""

from __future__ import annotations

import re
from typing import Any

__all__ = [
    "CANCELLED",
    "FAILED_STATUSES",
    "HOSTED_UNDER_WAY",
    "PENDING",
    "REJECTED",
    "TIMED_OUT",
    "TOOL_CALL_STATUSES",
    "call_failed",
    "call_item_status",
    "failed_sql",
    "hosted_status",
    "item_error",
    "output_call_status",
    "output_error",
    "output_status",
    "reports_error",
    "span_detail",
    "span_error_text",
    "span_outcome",
]

# A tool call's ``status``. turnstore's own: ``pending`` (no output yet: an approval, or a
# tool under way), ``completed``, ``failed`` (the tool raised: the SDK's error output, an
# error its trace span or an MCP call reports), ``timed_out`` (the SDK's timeout output),
# ``cancelled`` (its trace span says so) and ``rejected`` (a human refused the approval: the
# SDK's rejection output, or its span); hosted tools keep the Responses API's (``completed``,
# ``incomplete``, ``failed``, ``in_progress``, ``searching``, …).
PENDING = "pending"
_COMPLETED = "completed"
_FAILED = "failed"
TIMED_OUT = "timed_out"
CANCELLED = "cancelled"
REJECTED = "rejected"

# The one definition of a failed tool call, for Python (``call_failed``, ``ToolCall.failed``)
# and SQL (``failed_sql``: Store.tool_calls(status="failed"), Store.tool_stats, the views):
# its status says so (a tool that could not finish, ran out of time or was cancelled;
# ``incomplete``: the model's output was cut off), or an error was recorded (an MCP call's
# error, a tool output that reports one: see ``reports_error``, the exception a trace span
# carries). A rejected call did not fail: a human decided. ``error`` is no status.
FAILED_STATUSES: frozenset[str] = frozenset({_FAILED, "incomplete", TIMED_OUT, CANCELLED})

# The statuses of a hosted tool's item that say it is still under way (no result yet).
HOSTED_UNDER_WAY: frozenset[str] = frozenset({"in_progress", "searching", "generating"})

# Every status a tool call can have: turnstore's (above) and the Responses API's for tool call
# items (hosted tools report their progress: searching, interpreting, generating, calling).
TOOL_CALL_STATUSES: frozenset[str] = FAILED_STATUSES | {
    _COMPLETED,
    PENDING,
    REJECTED,
    "in_progress",
    "searching",
    "interpreting",
    "generating",
    "calling",
}


def call_failed(status: str | None, error: str | None) -> bool:
    """A tool call with this status and error failed (see ``FAILED_STATUSES``)."""
    return status in FAILED_STATUSES or error is not None


def failed_sql(status: str = "status", error: str = "error") -> str:
    """``call_failed`` as a SQL condition on the columns ``status`` and ``error``."""
    statuses = ", ".join(f"'{name}'" for name in sorted(FAILED_STATUSES))
    return f"({status} IN ({statuses}) OR {error} IS NOT NULL)"


# --- what an item and a tool's output say ------------------------------------------------

# Outputs that report a failure in words rather than a status: what openai-agents writes when
# a function tool raises (``default_tool_error_function``) or times out
# (``default_tool_timeout_error_message``). Releases before 0.23 add the exception's text
# (" Error: ...") and word bad JSON arguments apart. A custom ``failure_error_function`` is
# not recognised; its calls count as completed.
_TIMEOUT_OUTPUT = r"Tool '.*' timed out after [0-9.e+-]+ seconds\."
_ERROR_OUTPUT = re.compile(
    r"An error occurred while running the tool\. Please try again\.(?: Error: .*)?"
    r"|An error occurred while parsing tool arguments\. Please try again with valid JSON\."
    r" Error: .*"
    r"|" + _TIMEOUT_OUTPUT,
    re.DOTALL,
)
_TIMEOUT = re.compile(_TIMEOUT_OUTPUT, re.DOTALL)
# What openai-agents writes as the output of a call a human rejected (its default
# ``DEFAULT_APPROVAL_REJECTION_MESSAGE``; a custom message is known from the trace span).
_REJECTION = "Tool execution was not approved."


def item_error(kind: str, status: str, output: str | None) -> str | None:
    """The error an item with a status and no error field of its own carries: a hosted
    tool's or an output's text when its status says it failed (a call item's status says
    only that the model finished writing it). Items without a status carry none."""
    return output if kind != "tool_call" and status in FAILED_STATUSES else None


def reports_error(output: str | None) -> bool:
    """The tool output is one of the SDK's error messages (see ``_ERROR_OUTPUT``)."""
    return output is not None and _ERROR_OUTPUT.fullmatch(output) is not None


def output_status(output: str | None) -> str | None:
    """The status a tool's output alone says: ``timed_out``, ``failed`` (an error message),
    ``rejected``; None when it says nothing."""
    if output is None:
        return None
    if _TIMEOUT.fullmatch(output):
        return TIMED_OUT
    if reports_error(output):
        return _FAILED
    return REJECTED if output == _REJECTION else None


def call_item_status(status: str | None) -> str:
    """A call's status from its call item, before any output: ``pending`` unless the model
    left it failed or incomplete (the item's own status says the model finished writing it,
    not that the tool ran)."""
    return status if status in FAILED_STATUSES else PENDING


def output_call_status(status: str | None, error: str | None, output: str | None) -> str:
    """A call's status once its output item (with this status, error and text) arrives."""
    if status is not None and status not in ("in_progress", "searching", _COMPLETED):
        return status
    if error is not None:
        return _FAILED
    return output_status(output) or _COMPLETED


def output_error(error: str | None, output: str | None) -> str | None:
    """A call's error once its output item arrives: the item's error, else an output that
    reports one."""
    if error is not None:
        return error
    return output if reports_error(output) else None


def hosted_status(status: str | None, error: str | None) -> str:
    """A hosted tool call's status: its item's, except that an MCP call that reports an error
    failed, whatever status the item carries."""
    if error is not None and status not in FAILED_STATUSES:
        return _FAILED
    return status or _COMPLETED


# --- what a trace span says ----------------------------------------------------------------

# What the SDK's function spans say of a call that did not fail on its own: a human rejected
# it (the error data names the call), or it was cancelled.
_SPAN_REJECTED = "was manually rejected by user"
_SPAN_CANCELLED = "Tool execution cancelled"
# The SDK's stand-ins for an error's text when it keeps the text out of traces.
_REDACTED = ("Tool execution failed. Error details are redacted.",)


def span_detail(error: Any) -> str | None:
    """The detail of a span's error: the exception's message, where the SDK gives it."""
    data = error.get("data") if isinstance(error, dict) else None
    detail = data.get("error") if isinstance(data, dict) else None
    return detail if isinstance(detail, str) and detail and detail not in _REDACTED else None


def span_error_text(error: Any) -> str | None:
    """The most telling text of a span's error: its detail, else its message."""
    if not isinstance(error, dict):
        return None
    message = error.get("message")
    return span_detail(error) or (message if isinstance(message, str) else str(message))


def span_outcome(error: Any) -> tuple[str, str | None]:
    """A failed function span's (status, error) for its tool call; the error only when the
    span has the exception's text (else the call keeps the one its output gave)."""
    detail = span_detail(error)
    if detail is not None and _SPAN_REJECTED in detail:
        return REJECTED, None
    if isinstance(error, dict) and error.get("message") == _SPAN_CANCELLED:
        return CANCELLED, detail
    return _FAILED, detail
