"""What every part of the facade shares: the backend, exactly-once writes, argument checks."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any, TypeVar, overload

from ..core.history import ANY_HEAD, ExpectedHead
from ..core.once import check_operation_id, new_operation_id, once
from ..core.ops import Backend, Op
from ..domain import validate
from ..errors import InvalidOperationError, OutcomeUnknownError, RunNotFoundError

__all__ = ["NO_LIMIT", "StoreBase", "expected_head_arg", "limit_arg", "run_id_arg"]

T = TypeVar("T")

# ``LIMIT`` for "no limit", bindable on every backend with room for the one more row some
# reads ask for.
NO_LIMIT = 2**62


def limit_arg(limit: Any) -> int:
    """A limit argument (1 to 2**63 - 1; as large as that means no limit) as bound."""
    return min(validate.count(limit, "limit", minimum=1), NO_LIMIT)


def run_id_arg(run_id: Any) -> int:
    return validate.lookup_id(run_id, "run", RunNotFoundError)


def expected_head_arg(expected_head: Any, what: str = "expected_head") -> ExpectedHead:
    """``expected_head`` (the argument ``what``) if it is a run id, None (an empty session)
    or ``ANY_HEAD``."""
    if expected_head is ANY_HEAD or expected_head is None:
        return expected_head
    # Compared with the head, never bound: an id that names nothing is simply not the head
    # (the write is refused with ConflictError).
    if isinstance(expected_head, bool) or not isinstance(expected_head, int):
        raise InvalidOperationError(
            f"{what} must be a run id, None or ANY_HEAD, got {validate.shown(expected_head)}"
        )
    return expected_head


class StoreBase:
    """The state and plumbing of ``Store``; its methods live in one mixin per audience."""

    def __init__(self, backend: Backend) -> None:
        """Wrap an open backend; most callers want ``Store.open``."""
        self.backend = validate.store_backend(backend)

    @property
    def read_only(self) -> bool:
        """Whether the store was opened with ``read_only=True`` (writes raise)."""
        return self.backend.read_only

    @property
    def dialect(self) -> str:
        """The SQL the database speaks: ``"sqlite"`` or ``"postgresql"``."""
        return self.backend.dialect

    @property
    def label(self) -> str:
        """What names the database to a person, never with a password: SQLite's path as
        opened (``:memory:`` included), ``PostgreSQL at user@host:port/dbname``."""
        return self.backend.label

    async def _write(
        self,
        sid: str,
        op: Callable[[], Op[T]],
        operation_id: str | None,
        keep: Callable[[T], Any] | None = None,
        replay: Callable[[Any], Op[T]] | None = None,
        *,
        ends_session: bool = False,
        likely: Any = None,
    ) -> T:
        """Run the write ``op()`` exactly once under its key (see ``core.once.once``)."""
        key = new_operation_id() if operation_id is None else check_operation_id(operation_id)
        try:
            return await self.backend.run(
                lambda: once(
                    sid, key, op(), keep, replay, ends_session=ends_session, likely=likely
                ),
                write=True,
            )
        except OutcomeUnknownError as exc:
            raise OutcomeUnknownError(
                f"{exc}. Retrying with operation_id={key!r} is safe: the write is applied at "
                "most once",
                key,
            ) from exc

    @overload
    def _bind_time(self, when: datetime) -> Any: ...
    @overload
    def _bind_time(self, when: None) -> None: ...
    def _bind_time(self, when: datetime | None) -> Any:
        """``when`` as the backend binds timestamps (``Backend.bind_time``); None stays None."""
        return None if when is None else self.backend.bind_time(when)

    # -- lifecycle -----------------------------------------------------------------------------

    def close(self) -> None:
        """Close the database. Idempotent."""
        self.backend.close()

    async def aclose(self) -> None:
        """Close the database without blocking the event loop."""
        await self.backend.aclose()
