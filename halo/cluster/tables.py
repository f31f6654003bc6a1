"""The tables that let several processes serve a family (PostgreSQL only): who is running, and
which of them holds the family now, at which epoch."""

from __future__ import annotations

from sqlalchemy import BigInteger, Column, DateTime, Integer, MetaData, String, Table

from halo.storage.family import family_column

metadata = MetaData()

nodes_table = Table(
    "nodes",
    metadata,
    Column("node_id", String(32), primary_key=True),
    Column("host", String(255), nullable=False),
    Column("address", String(255), nullable=False),  # cluster.advertise_url: where the others forward to
    Column("started_at", DateTime(timezone=True), nullable=False),
    Column("heartbeat_at", DateTime(timezone=True), nullable=False),
    Column("epoch", BigInteger),  # the family's epoch while this node holds it, else NULL
)

family_leases_table = Table(
    "family_leases",
    metadata,
    family_column(primary_key=True),
    Column("holder", String(32), nullable=False),  # the active node's id
    Column("epoch", BigInteger, nullable=False),  # raised by every take: the fencing token
    Column("expires_at", DateTime(timezone=True), nullable=False),  # PostgreSQL's clock
    Column("holder_pid", Integer, nullable=False),  # the holder's session (pg_backend_pid): gone, the lease is free
)
