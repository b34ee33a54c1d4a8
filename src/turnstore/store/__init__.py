"""``Store``: the async facade over one database, shared by sessions and queries.

Its methods are grouped by audience, one module each, and ``Store`` composes them:

- ``conversation``: what ``StructuredSession`` does (``add_items``, ``get_items``,
  ``pop_item``, ``clear_session``, ``history_tail``, ``compact``);
- ``tree``: the conversation tree (``fork``, ``move_head``, ``branches``, ``siblings``,
  ``tree``, ``runs``, ``add_runs``, ``delete_branch``) and viewing it (``path_view``, ``run``,
  ``run_items``, ``tool_call``);
- ``catalogue``: the sessions (``sessions``, ``session``, ``update_session``,
  ``patch_session``, ``delete_session``);
- ``analytics``: across sessions (``tool_calls``, ``slowest_tool_calls``, ``tool_stats``,
  ``model_responses``, ``usage``, ``search``, ``export``);
- ``spans``: the SDK's trace spans of each run (``spans``, ``slowest_spans``,
  ``error_spans``; ``_record_spans`` for ``turnstore.tracing``);
- ``annotations``: judgements of runs (``annotate``, ``update_annotation``,
  ``delete_annotation``, ``annotations``, ``annotation_stats``);
- ``dataset``: runs as evaluation and fine-tuning records (``dataset``, ``write_dataset``);
- ``diff``: two courses of a conversation compared (``diff``), on the tree and catalogue;
- ``chat``: a session as Chat Completions messages (``add_messages``, ``get_messages``).

``base`` holds what they share (the backend, exactly-once writes, argument checks) and
``opening`` turns a path or URL into a backend. ``shared`` is the process's registry of the
stores ``StructuredSession``s opened from one target share. Internal APIs for the importers,
which write only through the facade: ``tree.graft`` (``add_runs`` of prepared items) and
``adoption`` (taking over a ``SQLiteSession`` file).
"""

from __future__ import annotations

import os
from types import TracebackType
from typing import Any

from ..domain.targets import DatabaseInfo
from .analytics import AnalyticsMixin
from .annotations import AnnotationsMixin
from .catalogue import session_patch
from .chat import ChatMixin
from .conversation import ConversationMixin
from .dataset import DatasetMixin
from .diff import DiffMixin
from .opening import inspect_target, open_backend
from .spans import SpansMixin

__all__ = ["Store", "migrate", "session_patch"]


class Store(
    ChatMixin,
    ConversationMixin,
    DiffMixin,
    DatasetMixin,
    AnalyticsMixin,
    SpansMixin,
    AnnotationsMixin,
):
    """One database of conversations: open it once, share it between sessions and queries.

    ``Store.open(":memory:")``, ``Store.open("conversations.db")`` or
    ``Store.open("postgresql://host/db")``. Close it with ``close()`` / ``aclose()`` or use it
    as a (async) context manager.
    """

    @classmethod
    def open(cls, target: str | os.PathLike[str] = ":memory:", **options: Any) -> Store:
        """Open (creating or upgrading its schema) the database named by a path or URL.

        Keyword options go to the backend (SQLite: ``busy_timeout``, ``durable``; Postgres:
        see ``PostgresBackend``). ``read_only=True`` opens an existing turnstore database
        without ever writing to it, on both backends: no schema is created or migrated (a
        schema older than this turnstore is refused with ``SchemaError``, naming ``turnstore
        migrate``), searches leave the search index as it is, and every write method raises
        ``ReadOnlyError``. A SQLite file is opened with ``mode=ro`` (``immutable`` in a
        directory it cannot write; see docs/reliability.md). A SQLite file of another
        application is refused (``SchemaError``) and left as it was found.
        """
        return cls(open_backend(target, options))

    @staticmethod
    def inspect(target: str | os.PathLike[str], *, schema: str | None = None) -> DatabaseInfo:
        """What the database ``target`` (as ``open`` takes it) holds, found without creating or
        changing anything: missing, empty, turnstore's (at which schema version), the Agents
        SDK's session tables, or another application's. See ``turnstore.domain.targets``."""
        return inspect_target(target, schema)

    def __enter__(self) -> Store:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    async def __aenter__(self) -> Store:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()


def migrate(target: str | os.PathLike[str], **options: Any) -> int | None:
    """Create the database at ``target``, or bring its schema up to this turnstore's version;
    return the version it was at (None: it held no turnstore schema).

    Opening a store does the same; this is the step for deployments (where the stores that
    serve traffic open with ``migrate=False``, on Postgres) and for scripts. Each migration and
    its version row land in one transaction; concurrent callers on Postgres take turns on an
    advisory lock, on SQLite on the write lock. Options are ``Store.open``'s.
    """
    with Store.open(target, **options) as store:
        return store.backend.found_version
