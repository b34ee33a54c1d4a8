"""turnstore: agent conversations in a structured relational schema.

``StructuredSession`` is a drop-in ``Session`` for the OpenAI Agents SDK; ``Store`` queries
conversations across sessions. See the README for the schema and examples.
"""

from .agents.session import StructuredSession
from .chat import ChatSession
from .core.annotations import AnnotationGroup
from .core.history import ANY_HEAD, ExpectedHead
from .core.once import new_operation_id
from .core.ops import Backend
from .core.queries import SessionOrder, UsageGroup
from .core.search import SearchOrder
from .domain.diff import BranchDiff, RunDiff, ToolCallDiff
from .domain.model import (
    FIRST_PAGE,
    Annotation,
    AnnotationSource,
    AnnotationStats,
    Branch,
    BranchOrigin,
    DatasetRecord,
    Fork,
    HistoryTail,
    ModelResponse,
    NewRun,
    PageCursor,
    PathView,
    ResponseRecord,
    Run,
    RunStatus,
    SearchCount,
    SearchResult,
    SessionInfo,
    SessionPage,
    SessionPatch,
    SessionSummary,
    Telemetry,
    ToolCall,
    ToolStats,
    ToolTiming,
    TraceSpan,
    Usage,
    UsageRow,
)
from .domain.prices import Price, Prices
from .domain.targets import DatabaseInfo, DatabaseKind
from .domain.turns import BranchRef, RunRef, Turn, parse_run
from .errors import (
    ArgumentTypeError,
    ClosedError,
    ConfigurationError,
    ConflictError,
    ConnectionFailedError,
    InvalidItemError,
    InvalidOperationError,
    NotFoundError,
    OutcomeUnknownError,
    ReadOnlyError,
    RunNotFoundError,
    SchemaError,
    SessionNotFoundError,
    StorageError,
    TurnstoreError,
)
from .formats.dataset import DatasetFormat
from .formats.export import ExportFormat
from .importers.adopt import adopt_sdk_sessions
from .importers.copy import CopySummary, copy
from .store import Store, migrate
from .store.chat import MessageFormat


def __getattr__(name: str) -> str:
    """``turnstore.__version__``: the installed distribution's, looked up when first asked
    (``importlib.metadata`` is not imported with turnstore)."""
    if name == "__version__":
        from importlib.metadata import PackageNotFoundError, version

        try:
            return version("turnstore")
        except PackageNotFoundError:  # run from a source tree that was never installed
            return "0+unknown"
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "ANY_HEAD",
    "FIRST_PAGE",
    "Annotation",
    "AnnotationGroup",
    "AnnotationSource",
    "AnnotationStats",
    "ArgumentTypeError",
    "Backend",
    "Branch",
    "BranchDiff",
    "BranchOrigin",
    "BranchRef",
    "ChatSession",
    "ClosedError",
    "ConfigurationError",
    "ConflictError",
    "ConnectionFailedError",
    "CopySummary",
    "DatabaseInfo",
    "DatabaseKind",
    "DatasetFormat",
    "DatasetRecord",
    "ExpectedHead",
    "ExportFormat",
    "Fork",
    "HistoryTail",
    "InvalidItemError",
    "InvalidOperationError",
    "MessageFormat",
    "ModelResponse",
    "NewRun",
    "NotFoundError",
    "OutcomeUnknownError",
    "PageCursor",
    "PathView",
    "Price",
    "Prices",
    "ReadOnlyError",
    "ResponseRecord",
    "Run",
    "RunDiff",
    "RunNotFoundError",
    "RunRef",
    "RunStatus",
    "SchemaError",
    "SearchCount",
    "SearchOrder",
    "SearchResult",
    "SessionInfo",
    "SessionNotFoundError",
    "SessionOrder",
    "SessionPage",
    "SessionPatch",
    "SessionSummary",
    "StorageError",
    "Store",
    "StructuredSession",
    "Telemetry",
    "ToolCall",
    "ToolCallDiff",
    "ToolStats",
    "ToolTiming",
    "TraceSpan",
    "Turn",
    "TurnstoreError",
    "Usage",
    "UsageGroup",
    "UsageRow",
    "adopt_sdk_sessions",
    "copy",
    "migrate",
    "new_operation_id",
    "parse_run",
]
