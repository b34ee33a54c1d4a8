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
``merge`` (``plan_merge``, ``merge_session``, ``import_source``), ``adopt`` (a
``SQLiteSession`` file's history taken over at a session's first use) and ``copy`` (sessions
from another turnstore database). Internal: the public entry points are ``turnstore import``,
``turnstore.copy`` and ``turnstore.adopt_sdk_sessions``. What this package names itself is
what ``turnstore import`` runs (open a source, import it, its summary) and the merge of one
session; the rest is imported from its module.
"""

from __future__ import annotations

from .merge import ImportSummary, import_source, merge_session
from .sources import open_source

__all__ = ["ImportSummary", "import_source", "merge_session", "open_source"]
