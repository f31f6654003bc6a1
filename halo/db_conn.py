"""A connection to halo.db, as every store and adapter is handed one (`HaloDB.write`, `read`,
`atomic`, `autocommit`; the port's `Tables`): a Core statement in, its result out with the rows
already read. On PostgreSQL it is SQLAlchemy's `AsyncConnection`; on SQLite halo's own
`SqliteConnection` (halo/storage/sqlite.py), which does not load SQLAlchemy's ORM."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeVarTuple, overload

if TYPE_CHECKING:
    from sqlalchemy import CursorResult, Dialect, Executable
    from sqlalchemy.sql.selectable import TypedReturnsRows

_Ts = TypeVarTuple("_Ts")
Parameters = Mapping[str, Any] | Sequence[Mapping[str, Any]]  # one row's values, or many rows' (executemany)


class Conn(Protocol):
    @property
    def dialect(self) -> Dialect: ...

    @overload
    async def execute(
        self, statement: TypedReturnsRows[*_Ts], parameters: Parameters | None = None
    ) -> CursorResult[*_Ts]: ...

    @overload
    async def execute(
        self, statement: Executable, parameters: Parameters | None = None
    ) -> CursorResult[*tuple[Any, ...]]: ...
