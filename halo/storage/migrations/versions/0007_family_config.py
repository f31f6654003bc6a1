"""The family's halo.yaml on PostgreSQL (#31): one row a version, (family_id, version), the
store of record every process of the family follows; row-level security as on every
family table (0006).

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-28 15:00:12.038431
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

MINE = "family_id = current_setting('halo.family_id', true)"


def upgrade() -> None:
    op.create_table(
        "family_config",
        sa.Column("version", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("sha256", sa.String(length=64), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("family_id", sa.String(length=64), nullable=False),
        sa.PrimaryKeyConstraint("family_id", "version"),
    )
    op.execute("ALTER TABLE family_config ENABLE ROW LEVEL SECURITY")
    op.execute("ALTER TABLE family_config FORCE ROW LEVEL SECURITY")
    op.execute(f"CREATE POLICY family_only ON family_config USING ({MINE}) WITH CHECK ({MINE})")


def downgrade() -> None:
    op.drop_table("family_config")
