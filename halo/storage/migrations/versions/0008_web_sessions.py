"""Web sessions (#32): the dashboard and web chat sign-ins, stored as the sha256 of the cookie,
so a browser stays signed in across restarts and on every process; keyed by family and
kept apart by row-level security as every family table (0006).

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-28 15:09:31.053413
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

MINE = "family_id = current_setting('halo.family_id', true)"


def upgrade() -> None:
    op.create_table(
        "web_sessions",
        sa.Column("digest", sa.String(length=64), nullable=False),
        sa.Column("created", sa.Float(), nullable=False),
        sa.Column("expires", sa.Float(), nullable=False),
        sa.Column("member_id", sa.String(length=64), nullable=True),
        sa.Column("family_id", sa.String(length=64), nullable=False),
        sa.PrimaryKeyConstraint("family_id", "digest"),
    )
    op.execute("ALTER TABLE web_sessions ENABLE ROW LEVEL SECURITY")
    op.execute("ALTER TABLE web_sessions FORCE ROW LEVEL SECURITY")
    op.execute(f"CREATE POLICY family_only ON web_sessions USING ({MINE}) WITH CHECK ({MINE})")


def downgrade() -> None:
    op.drop_table("web_sessions")
