"""One active process per family (#31): the family lease and its epoch (the fencing token),
each node's epoch; the scope leases and handoffs of #24 go. Both tables are kept apart by
row-level security as every family table (0006): a process sees only its family's lease and nodes.

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-28 15:05:57.775279
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

MINE = "family_id = current_setting('halo.family_id', true)"


def upgrade() -> None:
    op.create_table(
        "family_leases",
        sa.Column("family_id", sa.String(length=64), nullable=False),
        sa.Column("holder", sa.String(length=32), nullable=False),
        sa.Column("epoch", sa.BigInteger(), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("holder_pid", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("family_id"),
    )
    op.drop_index(op.f("ix_handoffs_target_state"), table_name="handoffs")
    op.drop_table("handoffs")
    op.drop_index(op.f("ix_scope_leases_node_id"), table_name="scope_leases")
    op.drop_table("scope_leases")
    op.add_column("nodes", sa.Column("epoch", sa.BigInteger(), nullable=True))
    for table in ("family_leases", "nodes"):
        op.execute(f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY")
        op.execute(f"ALTER TABLE {table} FORCE ROW LEVEL SECURITY")
        op.execute(f"CREATE POLICY family_only ON {table} USING ({MINE}) WITH CHECK ({MINE})")


def downgrade() -> None:
    op.execute("DROP POLICY family_only ON nodes")
    op.execute("ALTER TABLE nodes NO FORCE ROW LEVEL SECURITY")
    op.execute("ALTER TABLE nodes DISABLE ROW LEVEL SECURITY")
    op.drop_column("nodes", "epoch")
    op.create_table(
        "scope_leases",
        sa.Column("scope_id", sa.VARCHAR(length=200), autoincrement=False, nullable=False),
        sa.Column("node_id", sa.VARCHAR(length=32), autoincrement=False, nullable=False),
        sa.Column("expires_at", postgresql.TIMESTAMP(timezone=True), autoincrement=False, nullable=False),
        sa.Column("family_id", sa.VARCHAR(length=64), autoincrement=False, nullable=False),
        sa.PrimaryKeyConstraint("scope_id", name=op.f("scope_leases_pkey")),
    )
    op.create_index(op.f("ix_scope_leases_node_id"), "scope_leases", ["node_id"], unique=False)
    op.create_table(
        "handoffs",
        sa.Column("id", sa.VARCHAR(length=32), autoincrement=False, nullable=False),
        sa.Column("scope_id", sa.VARCHAR(length=200), autoincrement=False, nullable=False),
        sa.Column("origin_node", sa.VARCHAR(length=32), autoincrement=False, nullable=False),
        sa.Column("target_node", sa.VARCHAR(length=32), autoincrement=False, nullable=False),
        sa.Column("live", sa.BOOLEAN(), autoincrement=False, nullable=False),
        sa.Column("message", sa.TEXT(), autoincrement=False, nullable=False),
        sa.Column("media", postgresql.BYTEA(), autoincrement=False, nullable=True),
        sa.Column("state", sa.VARCHAR(length=8), autoincrement=False, nullable=False),
        sa.Column("outcome", sa.TEXT(), autoincrement=False, nullable=True),
        sa.Column("created", postgresql.TIMESTAMP(timezone=True), autoincrement=False, nullable=False),
        sa.Column("family_id", sa.VARCHAR(length=64), autoincrement=False, nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("handoffs_pkey")),
    )
    op.create_index(op.f("ix_handoffs_target_state"), "handoffs", ["target_node", "state"], unique=False)
    op.drop_table("family_leases")
