"""turnstore: agent conversations in a structured relational schema.

``StructuredSession`` is a drop-in ``Session`` for the OpenAI Agents SDK; ``Store`` queries
conversations across sessions. See the README for the schema and examples.
"""

from .core.once import new_operation_id
from .errors import (
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
from .importers import adopt_sdk_sessions
from .inspection import DatabaseInfo, DatabaseKind
from .model import (
    Branch,
    Fork,
    HistoryTail,
    ModelResponse,
    NewRun,
    PathView,
    Run,
    SearchResult,
    SessionInfo,
    SessionPage,
    ToolCall,
    ToolStats,
    Usage,
    UsageRow,
)
from .session import StructuredSession
from .store import Store, migrate

__all__ = [
    "Branch",
    "ClosedError",
    "ConfigurationError",
    "ConflictError",
    "ConnectionFailedError",
    "DatabaseInfo",
    "DatabaseKind",
    "Fork",
    "HistoryTail",
    "InvalidItemError",
    "InvalidOperationError",
    "ModelResponse",
    "NewRun",
    "NotFoundError",
    "OutcomeUnknownError",
    "PathView",
    "ReadOnlyError",
    "Run",
    "RunNotFoundError",
    "SchemaError",
    "SearchResult",
    "SessionInfo",
    "SessionNotFoundError",
    "SessionPage",
    "StorageError",
    "Store",
    "StructuredSession",
    "ToolCall",
    "ToolStats",
    "TurnstoreError",
    "Usage",
    "UsageRow",
    "adopt_sdk_sessions",
    "migrate",
    "new_operation_id",
]
