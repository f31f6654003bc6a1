"""Several families on one database (#31): every key widened to (family_id, key), and
row-level security on every family table, so a connection sees only the family it says it
serves (`SET halo.family_id`, halo/storage/family.py).

FORCE makes the policies hold for the tables' owner too (halo's own role, which ran this
migration); a superuser or a BYPASSRLS role still sees everything, so halo should not
connect as one. A connection that names no family sees no rows and may write none.

The cluster's tables (nodes, scope_leases, handoffs) are left as they are: #31's one active
process per family replaces them.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-28 15:10:00.000000
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

NATURAL_KEYS = {
    "approval_asks": ["outbox_id"],
    "discord_messages": ["message_id"],
    "group_intruders": ["scope_id", "platform_user_id"],
    "home_entity_state": ["source", "entity"],
    "home_fired_events": ["rule_id", "event_id"],
    "home_mutes": ["member_id"],
    "home_rule_state": ["rule_id", "entity"],
    "suspended_groups": ["scope_id"],
    "telegram_updates": ["update_id"],
    "unconfigured_chats_noticed": ["scope_id"],
    "usage_notices": ["day", "key"],
}
UNIQUE = {"home_observations": "event_id", "outbox": "id", "web_inbox": "id"}  # table: column
# counted keys: unique across families already, but a family moved in from its own halo.db
# (`halo storage migrate`) brings its numbers along, which another family may hold
COUNTED_KEYS = {
    "approvals": "id",
    "audit_events": "id",
    "home_observations": "id",
    "home_queue": "id",
    "list_items": "id",
    "outbox": "seq",
    "pairing_requests": "id",
    "reminders": "id",
    "tasks": "number",
    "task_notes": "id",
    "usage": "id",
    "web_inbox": "seq",
}
NOTES_TASK = "task_notes_task_number_fkey"
FAMILY_TABLES = sorted(
    {
        *NATURAL_KEYS,
        *UNIQUE,
        "approvals",
        "audit_events",
        "home_queue",
        "list_items",
        "memory_files",
        "pairing_requests",
        "reminders",
        "task_notes",
        "tasks",
        "transcript_lines",
        "usage",
    }
)
MINE = "family_id = current_setting('halo.family_id', true)"


def upgrade() -> None:
    op.drop_constraint(NOTES_TASK, "task_notes", type_="foreignkey")
    for table, key in [*NATURAL_KEYS.items(), *((t, [c]) for t, c in COUNTED_KEYS.items())]:
        op.drop_constraint(f"{table}_pkey", table, type_="primary")
        op.create_primary_key(f"{table}_pkey", table, ["family_id", *key])
    op.create_foreign_key(NOTES_TASK, "task_notes", "tasks", ["family_id", "task_number"], ["family_id", "number"])
    for table, column in UNIQUE.items():
        op.drop_constraint(f"{table}_{column}_key", table, type_="unique")
        op.create_unique_constraint(f"{table}_family_{column}_key", table, ["family_id", column])
    for table in FAMILY_TABLES:
        op.execute(f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY")
        op.execute(f"ALTER TABLE {table} FORCE ROW LEVEL SECURITY")
        op.execute(f"CREATE POLICY family_only ON {table} USING ({MINE}) WITH CHECK ({MINE})")


def downgrade() -> None:
    for table in FAMILY_TABLES:
        op.execute(f"DROP POLICY family_only ON {table}")
        op.execute(f"ALTER TABLE {table} NO FORCE ROW LEVEL SECURITY")
        op.execute(f"ALTER TABLE {table} DISABLE ROW LEVEL SECURITY")
    for table, column in UNIQUE.items():
        op.drop_constraint(f"{table}_family_{column}_key", table, type_="unique")
        op.create_unique_constraint(f"{table}_{column}_key", table, [column])
    op.drop_constraint(NOTES_TASK, "task_notes", type_="foreignkey")
    for table, key in [*NATURAL_KEYS.items(), *((t, [c]) for t, c in COUNTED_KEYS.items())]:
        op.drop_constraint(f"{table}_pkey", table, type_="primary")
        op.create_primary_key(f"{table}_pkey", table, key)
    op.create_foreign_key(NOTES_TASK, "task_notes", "tasks", ["task_number"], ["number"])
