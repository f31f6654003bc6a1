"""Decisions as buttons (#35): the asks a button names by an opaque id, and the buttons
under an outbox message; asks keyed by family and kept apart by row-level security as every
family table (0006).

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-28 14:58:19.905493
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

MINE = "family_id = current_setting('halo.family_id', true)"


def upgrade() -> None:
    op.create_table(
        "asks",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("options", sa.Text(), nullable=False),
        sa.Column("who", sa.String(length=64), nullable=False),
        sa.Column("created", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires", sa.DateTime(timezone=True), nullable=False),
        sa.Column("decided_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("decided_by", sa.String(length=64), nullable=True),
        sa.Column("decided", sa.String(length=64), nullable=True),
        sa.Column("family_id", sa.String(length=64), nullable=False),
        sa.PrimaryKeyConstraint("family_id", "id"),
    )
    op.execute("ALTER TABLE asks ENABLE ROW LEVEL SECURITY")
    op.execute("ALTER TABLE asks FORCE ROW LEVEL SECURITY")
    op.execute(f"CREATE POLICY family_only ON asks USING ({MINE}) WITH CHECK ({MINE})")
    op.add_column("outbox", sa.Column("choices", sa.Text(), nullable=True))


def downgrade() -> None:
    op.drop_column("outbox", "choices")
    op.drop_table("asks")
