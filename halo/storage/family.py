"""Every row in halo.db belongs to one family, and a `HaloDB` sees only its own family's rows.

A store declares only its own columns; `HaloDB` adds `family_id` to each table it is handed
(`carry_family`), and the column's default reads the id from the engine the row is written
through, so no insert can leave it out. A store whose key is natural (a Telegram update id, a
scope id, a member id) declares the column itself to put it first in the key
(`family_column(primary_key=True)`): two families may hold the same chat and member ids.

Reads and changes are filtered at one depth, below every store: `bind_family` hooks the engine so
each SELECT (every one in a statement: subqueries, CTEs, unions), UPDATE and DELETE it executes
gets `family_id = <its family>` on each family table it reads from, and an INSERT naming
another family is refused. A store written without a filter still sees only its family. Raw
SQL (`text()`) is not rewritten: on PostgreSQL row-level security is the second wall
(`halo.family_id`, set on each connection here; the policies are migration 0006's).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from sqlalchemy import Column, MetaData, PrimaryKeyConstraint, String, Table, UniqueConstraint, and_, event
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.sql import visitors
from sqlalchemy.sql.dml import Delete, Insert, Update
from sqlalchemy.sql.elements import ClauseElement, ColumnElement
from sqlalchemy.sql.selectable import Alias, CompoundSelect, FromClause, Join, Select, TableClause

FAMILY_COLUMN = "family_id"
FAMILY_OPTION = "halo_family_id"  # the engine's execution option that holds the id
FAMILY_ID_LENGTH = 64
FAMILY_SETTING = "halo.family_id"  # PostgreSQL: the connection's family, read by the RLS policies


class ForeignFamilyRow(RuntimeError):
    """An INSERT through one family's `HaloDB` named another family's id."""


def _family_of(context: Any) -> str:
    """The column default: the family of the engine this insert runs on."""
    family_id = context.execution_options.get(FAMILY_OPTION)
    if not family_id:
        raise RuntimeError("a row was written outside HaloDB: its engine names no family")
    return str(family_id)


def family_column(*, primary_key: bool = False) -> Column[str]:
    """The column; a table declares it itself only to put it in its primary key."""
    return Column(FAMILY_COLUMN, String(FAMILY_ID_LENGTH), nullable=False, primary_key=primary_key, default=_family_of)


def carry_family(metadata: MetaData) -> None:
    """Give each of `metadata`'s tables its `family_id` column, first in its natural keys
    (once; idempotent). A table that declares the column itself keeps the keys it declared."""
    for table in metadata.tables.values():
        if FAMILY_COLUMN not in table.c:
            column = family_column()
            table.append_column(column)
            _widen_keys(table, column)


def _widen_keys(table: Table, family: Column[str]) -> None:
    """A natural primary key (not one number the database counts up) and every unique
    constraint become (family_id, …): two families may hold the same chat, update and member
    ids. A counted key stays as it is; it is unique across families already."""
    key = table.primary_key
    if key.columns and table.autoincrement_column is None:
        family.primary_key = True
        name = key.name if isinstance(key.name, str) else None
        table.append_constraint(PrimaryKeyConstraint(family, *key.columns, name=name))
    for unique in [c for c in table.constraints if isinstance(c, UniqueConstraint)]:
        names = [column.name for column in unique.columns]
        table.constraints.discard(unique)
        for column in unique.columns:
            column.unique = False
        table.append_constraint(
            UniqueConstraint(family, *names, name=unique.name or f"{table.name}_family_{'_'.join(names)}_key")
        )


def bind_family(engine: Engine, family_id: str) -> None:
    """Every statement `engine` executes sees and changes only `family_id`'s rows; on
    PostgreSQL each new connection also says which family it serves, for row-level security."""
    event.listen(engine, "before_execute", _only_the_family, retval=True)
    if engine.dialect.name == "postgresql":
        event.listen(engine, "connect", lambda dbapi_connection, _: _say_family(dbapi_connection, family_id))


def _say_family(dbapi_connection: Any, family_id: str) -> None:
    """`SET halo.family_id` for the connection's whole life (outside any transaction, so a
    rollback keeps it): SQLAlchemy's documented way to set a session variable on connect."""
    autocommit = dbapi_connection.autocommit
    dbapi_connection.autocommit = True
    cursor = dbapi_connection.cursor()
    literal = family_id.replace("'", "''")
    cursor.execute(f"SELECT set_config('{FAMILY_SETTING}', '{literal}', false)")
    cursor.close()
    dbapi_connection.autocommit = autocommit


def _only_the_family(
    conn: Connection,
    statement: Any,
    multiparams: Any,
    params: Mapping[str, Any],
    execution_options: Mapping[str, Any],
) -> tuple[Any, Any, Mapping[str, Any]]:
    family_id = execution_options.get(FAMILY_OPTION)
    if family_id and isinstance(statement, ClauseElement):
        statement = family_only(statement, str(family_id), [*_listed(multiparams), params])
    return statement, multiparams, params


def _listed(multiparams: Any) -> list[Mapping[str, Any]]:
    if not multiparams:
        return []
    found: list[Any] = []
    for given in multiparams:
        found.extend(given if isinstance(given, list | tuple) else [given])
    return [p for p in found if isinstance(p, Mapping)]


def family_only(statement: ClauseElement, family_id: str, params: Iterable[Mapping[str, Any]] = ()) -> ClauseElement:
    """`statement` as it may run for `family_id`: a copy with the family's filter on every
    SELECT, UPDATE and DELETE in it. Anything else (DDL, `text()`) comes back as it was."""
    if isinstance(statement, Insert):
        _refuse_foreign_values(statement, family_id, params)
        if statement.select is None:
            return statement  # nothing read: the column's default writes the family
    elif not isinstance(statement, Select | CompoundSelect | Update | Delete):
        return statement

    def mine(table: FromClause) -> ColumnElement[bool]:
        return table.c[FAMILY_COLUMN] == family_id

    def on_select(select: Select[Any]) -> None:
        select._where_criteria += tuple(mine(t) for t in _family_tables(select.get_final_froms()))
        select._setup_joins = tuple(_outer_filtered(join, mine) for join in select._setup_joins)

    def on_join(join: Join) -> None:
        _refuse_full(join.full)
        if join.isouter:  # the optional side's filter belongs in ON: in WHERE it would drop the outer rows
            join.onclause = and_(join.onclause, *(mine(t) for t in _family_tables([join.right])))  # type: ignore[arg-type]

    def on_change(change: Update | Delete) -> None:
        target = change.table
        if isinstance(target, FromClause) and _is_family_table(target):
            change._where_criteria += (mine(target),)

    visits: dict[str, Callable[[Any], None]] = {
        "select": on_select,
        "join": on_join,
        "update": on_change,
        "delete": on_change,
    }
    return visitors.cloned_traverse(statement, {}, visits)  # type: ignore[return-value]


def _outer_filtered(join: tuple[Any, ...], mine: Callable[[FromClause], ColumnElement[bool]]) -> tuple[Any, ...]:
    """A `select().outerjoin(…)` kept as (target, ON, from, flags): the target's filter joins its ON."""
    target, onclause, from_, flags = join
    _refuse_full(flags.get("full", False))
    if not flags.get("isouter") or not isinstance(target, FromClause) or not (tables := _family_tables([target])):
        return join
    if onclause is None:
        raise NotImplementedError(
            "an outer join to a family table needs its ON written out: the family's filter joins it"
        )
    return (target, and_(onclause, *(mine(t) for t in tables)), from_, flags)


def _refuse_full(full: bool) -> None:
    if full:
        raise NotImplementedError(
            "a FULL OUTER JOIN cannot be kept to one family: neither side's filter may go in WHERE"
        )


def _family_tables(froms: Iterable[FromClause]) -> list[FromClause]:
    """The tables (or their aliases) among `froms` that carry `family_id`, and a join's sides
    (not an outer join's optional side: it is filtered in its ON). A subquery is left alone: its
    own SELECT is filtered where it stands."""
    found: list[FromClause] = []
    for from_ in froms:
        if isinstance(from_, Join):
            found.extend(_family_tables([from_.left] if from_.isouter else [from_.left, from_.right]))
        elif _is_family_table(from_):
            found.append(from_)
    return found


def _is_family_table(from_: FromClause) -> bool:
    table = from_.element if isinstance(from_, Alias) else from_
    return isinstance(table, TableClause) and FAMILY_COLUMN in from_.c


def _refuse_foreign_values(insert: Insert, family_id: str, params: Iterable[Mapping[str, Any]]) -> None:
    given: list[Any] = [p.get(FAMILY_COLUMN) for p in params]
    values: Mapping[Any, Any] = insert._values or {}
    given.extend(
        value.value for key, value in values.items() if _name(key) == FAMILY_COLUMN and hasattr(value, "value")
    )
    for rows in insert._multi_values:
        for row in rows:
            if isinstance(row, Mapping):
                given.extend(v for k, v in row.items() if _name(k) == FAMILY_COLUMN)
    foreign = {str(g) for g in given if g is not None and not isinstance(g, ClauseElement)} - {family_id}
    if foreign:
        raise ForeignFamilyRow(f"a row for family {sorted(foreign)} written through family {family_id!r}'s store")


def _name(key: Any) -> str:
    return key if isinstance(key, str) else getattr(key, "key", "")
