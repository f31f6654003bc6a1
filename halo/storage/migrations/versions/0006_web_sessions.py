"""Web sessions (#32): the dashboard and web chat sign-ins, stored as the sha256 of the cookie,
so a browser stays signed in across restarts and on every process.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-28 15:09:31.053413
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
        "web_sessions",
        sa.Column("digest", sa.String(length=64), nullable=False),
        sa.Column("created", sa.Float(), nullable=False),
        sa.Column("expires", sa.Float(), nullable=False),
        sa.Column("member_id", sa.String(length=64), nullable=True),
        sa.Column("family_id", sa.String(length=64), nullable=False),
        sa.PrimaryKeyConstraint("digest"),
    )


def downgrade() -> None:
    op.drop_table("web_sessions")
