"""Importing conversations into a ``Store`` from the Agents SDK's sessions and turnstore exports.

Sources: the SDK's ``SQLiteSession`` tables (any table names), ``AdvancedSQLiteSession``
databases (their branches and per-turn usage), ``SQLAlchemySession`` tables (any SQLAlchemy
URL), and turnstore's own exports (JSONL, or the JSON document of one session).

Each source session is read into a tree of ``SourceRun`` (runs split at user messages, the
rule the store itself applies) and then *merged* into the store's session of the same id: a
run already stored at the same place with the same items is reused, a stored leaf run whose
items are a prefix of the source run's is extended, anything else is added as a new run. So a
second import adds nothing, a source that grew since adds only what is new, and an interrupted
import resumes where it stopped — without a marker table, and whatever was done to the store
session since (its own new runs are left alone).

The package, one job a module: ``base`` (the source model, ``Source``), one module per kind of
source (``sdk_sqlite``, ``sdk_sqlalchemy``, ``exports``), ``sources`` (``open_source``),
``merge`` (``plan_merge``, ``merge_session``, ``import_source``) and ``adopt`` (a
``SQLiteSession`` file's history taken over at a session's first use). Internal: the public
entry points are ``turnstore import`` and ``turnstore.adopt_sdk_sessions``.
"""

from __future__ import annotations

from .adopt import adopt_sdk_sessions
from .base import Source, SourceRun, SourceSession
from .merge import ImportSummary, MergePlan, MergeResult, import_source, merge_session, plan_merge
from .sdk_sqlite import connect_readonly, sqlite_tables
from .sources import SOURCE_KINDS, open_source

__all__ = [
    "SOURCE_KINDS",
    "ImportSummary",
    "MergePlan",
    "MergeResult",
    "Source",
    "SourceRun",
    "SourceSession",
    "adopt_sdk_sessions",
    "connect_readonly",
    "import_source",
    "merge_session",
    "open_source",
    "plan_merge",
    "sqlite_tables",
]
