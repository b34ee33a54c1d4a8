"""The source of the tables of the SDK's ``SQLAlchemySession``, on any SQLAlchemy URL."""

from __future__ import annotations

from typing import Any

from ..errors import ConfigurationError, SchemaError
from .base import Source, SourceRow, SourceSession, linear_session

__all__ = ["SQLAlchemySource"]


class SQLAlchemySource(Source):
    """Tables written by the SDK's ``SQLAlchemySession``, on any SQLAlchemy URL."""

    kind = "sqlalchemy"

    def __init__(self, url: str, messages_table: str | None) -> None:
        try:
            import sqlalchemy as sa
            from sqlalchemy.ext.asyncio import create_async_engine
        except ImportError as exc:
            raise ConfigurationError(
                "importing from a SQLAlchemy URL needs SQLAlchemy: "
                "pip install 'sqlalchemy[asyncio]'"
            ) from exc
        try:
            parsed = sa.make_url(url)
            self.location = parsed.render_as_string(hide_password=True)  # it gets printed
            self._async = parsed.get_dialect().is_async
            engine_factory = create_async_engine if self._async else sa.create_engine
            self._engine: Any = engine_factory(url)
        except (sa.exc.ArgumentError, sa.exc.NoSuchModuleError, ImportError) as exc:
            raise ConfigurationError(f"cannot use the SQLAlchemy URL {url!r}: {exc}") from exc
        self._sa = sa
        self._table = sa.table(
            messages_table or "agent_messages",
            sa.column("id"),
            sa.column("session_id"),
            sa.column("message_data"),
            sa.column("created_at"),
        )

    async def _fetch(self, statement: Any) -> list[Any]:
        try:
            if self._async:
                async with self._engine.connect() as conn:
                    return list((await conn.execute(statement)).all())
            with self._engine.connect() as conn:
                return list(conn.execute(statement).all())
        except self._sa.exc.SQLAlchemyError as exc:
            message = str(exc).splitlines()[0]
            raise SchemaError(f"cannot read {self.location}: {message}") from exc

    async def session_ids(self) -> list[str]:
        """Sessions in order of their first message."""
        t, sa = self._table, self._sa
        rows = await self._fetch(
            sa.select(t.c.session_id).group_by(t.c.session_id).order_by(sa.func.min(t.c.id))
        )
        return [str(row._mapping["session_id"]) for row in rows]

    async def total_items(self) -> int:
        """Rows of the messages table."""
        rows = await self._fetch(self._sa.select(self._sa.func.count()).select_from(self._table))
        [(count,)] = rows
        return int(count)

    async def load(self, session_id: str) -> SourceSession:
        """One session's messages, in order."""
        t = self._table
        rows = await self._fetch(
            self._sa.select(t.c.id, t.c.message_data, t.c.created_at)
            .where(t.c.session_id == session_id)
            .order_by(t.c.id)
        )
        columns = (row._mapping for row in rows)
        return linear_session(
            session_id,
            (SourceRow(c["id"], c["message_data"], c["created_at"]) for c in columns),
        )

    async def aclose(self) -> None:
        """Dispose of the engine."""
        if self._async:
            await self._engine.dispose()
        else:
            self._engine.dispose()
