"""Several processes serving one family (#24): the running nodes, the scope leases (and the
leader lease) and the messages handed from one node to another.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-26 14:40:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "nodes",
        sa.Column("node_id", sa.String(length=32), nullable=False),
        sa.Column("host", sa.String(length=255), nullable=False),
        sa.Column("address", sa.String(length=255), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("heartbeat_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("family_id", sa.String(length=64), nullable=False),
        sa.PrimaryKeyConstraint("node_id"),
    )
    op.create_table(
        "scope_leases",
        sa.Column("scope_id", sa.String(length=200), nullable=False),
        sa.Column("node_id", sa.String(length=32), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("family_id", sa.String(length=64), nullable=False),
        sa.PrimaryKeyConstraint("scope_id"),
    )
    op.create_index(op.f("ix_scope_leases_node_id"), "scope_leases", ["node_id"], unique=False)
    op.create_table(
        "handoffs",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("scope_id", sa.String(length=200), nullable=False),
        sa.Column("origin_node", sa.String(length=32), nullable=False),
        sa.Column("target_node", sa.String(length=32), nullable=False),
        sa.Column("live", sa.Boolean(), nullable=False),
        sa.Column("message", sa.Text(), nullable=False),
        sa.Column("media", sa.LargeBinary(), nullable=True),
        sa.Column("state", sa.String(length=8), nullable=False),
        sa.Column("outcome", sa.Text(), nullable=True),
        sa.Column("created", sa.DateTime(timezone=True), nullable=False),
        sa.Column("family_id", sa.String(length=64), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_handoffs_target_state", "handoffs", ["target_node", "state"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_handoffs_target_state", table_name="handoffs")
    op.drop_table("handoffs")
    op.drop_index(op.f("ix_scope_leases_node_id"), table_name="scope_leases")
    op.drop_table("scope_leases")
    op.drop_table("nodes")
