"""Decisions as buttons (#35): the asks a button names by an opaque id, and the buttons
under an outbox message.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-28 14:58:19.905493
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


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
        sa.PrimaryKeyConstraint("id"),
    )
    op.add_column("outbox", sa.Column("choices", sa.Text(), nullable=True))


def downgrade() -> None:
    op.drop_column("outbox", "choices")
    op.drop_table("asks")
