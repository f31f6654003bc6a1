"""The epoch check moves into the database (#31): each family table gets a statement trigger
that locks the family's lease row `FOR KEY SHARE` and refuses the statement unless the epoch
is the one the connection says it holds (`halo.epoch`, set by halo/storage/db.py). A fenced
write is then one statement and one round trip, as an unfenced one, not BEGIN, a SELECT of
the epoch, the write and COMMIT. The lease, the nodes and the config versions are written by
any process of the family, so they have no trigger.

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-28 19:00:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

UNFENCED = ("family_leases", "nodes", "family_config")
SQLSTATE = "HL409"  # halo/storage/db.py turns it into `Fenced`

FENCE = f"""
CREATE FUNCTION halo_fence() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    held text := current_setting('halo.epoch', true);
    found bigint;
BEGIN
    IF held IS NULL OR held = '' THEN
        RETURN NULL;  -- a connection outside the cluster (one process, a migration, an admin)
    END IF;
    SELECT epoch INTO found FROM family_leases
    WHERE family_id = current_setting('halo.family_id', true) FOR KEY SHARE;
    IF found IS DISTINCT FROM held::bigint THEN
        RAISE EXCEPTION 'this process does not hold its family (epoch %, the family''s %)', held, found
            USING ERRCODE = '{SQLSTATE}', DETAIL = coalesce(found::text, '');
    END IF;
    RETURN NULL;
END $$
"""


# every table with family_id at 0010 but the three above (a later table's migration adds its own
# trigger: tests/test_families.py checks that none is left without one)
FENCED = (
    "approval_asks", "approvals", "asks", "audit_events", "discord_messages", "group_intruders",
    "home_entity_state", "home_fired_events", "home_mutes", "home_observations", "home_queue",
    "home_rule_state", "list_items", "memory_files", "outbox", "pairing_requests", "reminders",
    "suspended_groups", "task_notes", "tasks", "telegram_updates", "transcript_lines",
    "unconfigured_chats_noticed", "usage", "usage_notices", "web_inbox", "web_sessions",
)  # fmt: skip


def upgrade() -> None:
    op.execute(FENCE)
    for table in FENCED:
        op.execute(
            f"CREATE TRIGGER halo_fence BEFORE INSERT OR UPDATE OR DELETE ON {table} "
            "FOR EACH STATEMENT EXECUTE FUNCTION halo_fence()"
        )


def downgrade() -> None:
    for table in FENCED:
        op.execute(f"DROP TRIGGER halo_fence ON {table}")
    op.execute("DROP FUNCTION halo_fence()")
