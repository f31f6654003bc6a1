"""The tables that let several processes share a family (PostgreSQL only): who is running, who
serves which scope, and the messages handed from one process to another."""

from __future__ import annotations

from sqlalchemy import Boolean, Column, DateTime, Index, LargeBinary, MetaData, String, Table, Text

metadata = MetaData()

nodes_table = Table(
    "nodes",
    metadata,
    Column("node_id", String(32), primary_key=True),
    Column("host", String(255), nullable=False),
    Column("address", String(255), nullable=False),  # where its HTTP port answers
    Column("started_at", DateTime(timezone=True), nullable=False),
    Column("heartbeat_at", DateTime(timezone=True), nullable=False),
)

scope_leases_table = Table(
    "scope_leases",
    metadata,
    Column("scope_id", String(200), primary_key=True),  # a scope id, or `halo:leader` for the singletons
    Column("node_id", String(32), nullable=False, index=True),
    Column("expires_at", DateTime(timezone=True), nullable=False),
)

handoffs_table = Table(
    "handoffs",
    metadata,
    Column("id", String(32), primary_key=True),  # the message's (the envelope's) id
    Column("scope_id", String(200), nullable=False),
    Column("origin_node", String(32), nullable=False),  # where the message came in, and waits
    Column("target_node", String(32), nullable=False),  # the lease holder asked to answer it
    Column("live", Boolean, nullable=False),  # a person waits on the origin's request: the reply goes back there
    Column("message", Text, nullable=False),  # the `Incoming`, as JSON
    Column("media", LargeBinary),  # the voice note's or attachment's bytes, read by the origin
    Column("state", String(8), nullable=False),  # waiting | answered
    Column("outcome", Text),  # the `TurnOutcome`, as JSON, once answered
    Column("created", DateTime(timezone=True), nullable=False),
    Index("ix_handoffs_target_state", "target_node", "state"),
)
