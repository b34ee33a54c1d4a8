"""turnstore: agent conversations in a structured relational schema.

``StructuredSession`` is a drop-in ``Session`` for the OpenAI Agents SDK; ``Store`` queries
conversations across sessions. See the README for the schema and examples.
"""

from .errors import (
    ClosedError,
    ConfigurationError,
    ConflictError,
    ConnectionFailedError,
    InvalidItemError,
    InvalidOperationError,
    NotFoundError,
    RunNotFoundError,
    SchemaError,
    SessionNotFoundError,
    StorageError,
    TurnstoreError,
)
from .model import Branch, Run, SessionInfo, ToolCall, Usage
from .session import StructuredSession
from .store import Store

__all__ = [
    "Branch",
    "ClosedError",
    "ConfigurationError",
    "ConflictError",
    "ConnectionFailedError",
    "InvalidItemError",
    "InvalidOperationError",
    "NotFoundError",
    "Run",
    "RunNotFoundError",
    "SchemaError",
    "SessionInfo",
    "SessionNotFoundError",
    "StorageError",
    "Store",
    "StructuredSession",
    "ToolCall",
    "TurnstoreError",
    "Usage",
]
