"""Memory jobs' progress on PostgreSQL (#31): distillation's and extraction's watermarks belong
to the family, written with the memory files they produced (halo/storage/job_rows.py). Keyed by
family, kept apart by row-level security (0006) and fenced (0011) as every family table.

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-29 01:30:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

MINE = "family_id = current_setting('halo.family_id', true)"


def upgrade() -> None:
    op.create_table(
        "memory_jobs",
        sa.Column("family_id", sa.String(length=64), nullable=False),
        sa.Column("scope_id", sa.String(length=200), nullable=False),
        sa.Column("job", sa.String(length=16), nullable=False),
        sa.Column("offset", sa.BigInteger(), nullable=False),
        sa.Column("runs", sa.Integer(), nullable=False),
        sa.Column("items", sa.Integer(), nullable=False),
        sa.Column("last_run", sa.Float(), nullable=True),
        sa.Column("last_success", sa.Float(), nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("failures", sa.Integer(), nullable=False),
        sa.Column("next_retry", sa.Float(), nullable=True),
        sa.Column("pending", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("family_id", "scope_id", "job"),
    )
    op.execute("ALTER TABLE memory_jobs ENABLE ROW LEVEL SECURITY")
    op.execute("ALTER TABLE memory_jobs FORCE ROW LEVEL SECURITY")
    op.execute(f"CREATE POLICY family_only ON memory_jobs USING ({MINE}) WITH CHECK ({MINE})")
    op.execute(
        "CREATE TRIGGER halo_fence BEFORE INSERT OR UPDATE OR DELETE ON memory_jobs "
        "FOR EACH STATEMENT EXECUTE FUNCTION halo_fence()"
    )


def downgrade() -> None:
    op.drop_table("memory_jobs")
