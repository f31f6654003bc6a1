"""halo.db's tables on PostgreSQL, as the stores declared them when halo moved to PostgreSQL,
each with `family_id`.

Revision ID: 0001
Revises:
Create Date: 2026-11-26
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "approval_asks",
        sa.Column("outbox_id", sa.String(length=64), nullable=False),
        sa.Column("request_id", sa.Integer(), nullable=False),
        sa.Column("parent_id", sa.String(length=64), nullable=False),
        sa.Column("scope_id", sa.String(length=200), nullable=False),
        sa.Column("asked_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("family_id", sa.String(length=64), nullable=False),
        sa.PrimaryKeyConstraint("outbox_id"),
    )
    op.create_index(op.f("ix_approval_asks_request_id"), "approval_asks", ["request_id"], unique=False)
    op.create_table(
        "approvals",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("action", sa.String(length=64), nullable=False),
        sa.Column("arguments", sa.Text(), nullable=False),
        sa.Column("summary", sa.Text(), nullable=False),
        sa.Column("asked_by", sa.String(length=64), nullable=False),
        sa.Column("scope_id", sa.String(length=200), nullable=False),
        sa.Column("created", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires", sa.DateTime(timezone=True), nullable=False),
        sa.Column("state", sa.String(length=8), nullable=False),
        sa.Column("decided_by", sa.String(length=64), nullable=True),
        sa.Column("outcome", sa.Text(), nullable=True),
        sa.Column("family_id", sa.String(length=64), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index(op.f("ix_approvals_state"), "approvals", ["state"], unique=False)
    op.create_table(
        "discord_messages",
        sa.Column("message_id", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("at", sa.Float(), nullable=False),
        sa.Column("family_id", sa.String(length=64), nullable=False),
        sa.PrimaryKeyConstraint("message_id"),
    )
    op.create_table(
        "discord_noticed_channels",
        sa.Column("channel_id", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("at", sa.Float(), nullable=False),
        sa.Column("family_id", sa.String(length=64), nullable=False),
        sa.PrimaryKeyConstraint("channel_id"),
    )
    op.create_table(
        "group_intruders",
        sa.Column("scope_id", sa.String(length=128), nullable=False),
        sa.Column("platform_user_id", sa.String(length=64), nullable=False),
        sa.Column("label", sa.String(length=256), nullable=False),
        sa.Column("seen_at", sa.Float(), nullable=False),
        sa.Column("family_id", sa.String(length=64), nullable=False),
        sa.PrimaryKeyConstraint("scope_id", "platform_user_id"),
    )
    op.create_table(
        "suspended_groups",
        sa.Column("scope_id", sa.String(length=128), nullable=False),
        sa.Column("since", sa.Float(), nullable=False),
        sa.Column("family_id", sa.String(length=64), nullable=False),
        sa.PrimaryKeyConstraint("scope_id"),
    )
    op.create_table(
        "home_entity_state",
        sa.Column("source", sa.String(length=32), nullable=False),
        sa.Column("entity", sa.String(length=255), nullable=False),
        sa.Column("topic", sa.String(length=512), nullable=False),
        sa.Column("state", sa.Text(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
        sa.Column("family_id", sa.String(length=64), nullable=False),
        sa.PrimaryKeyConstraint("source", "entity"),
    )
    op.create_table(
        "home_fired_events",
        sa.Column("rule_id", sa.String(length=64), nullable=False),
        sa.Column("event_id", sa.String(length=255), nullable=False),
        sa.Column("at", sa.Float(), nullable=False),
        sa.Column("family_id", sa.String(length=64), nullable=False),
        sa.PrimaryKeyConstraint("rule_id", "event_id"),
    )
    op.create_index(op.f("ix_home_fired_events_at"), "home_fired_events", ["at"], unique=False)
    op.create_table(
        "home_mutes",
        sa.Column("member_id", sa.String(length=64), nullable=False),
        sa.Column("until", sa.Float(), nullable=False),
        sa.Column("family_id", sa.String(length=64), nullable=False),
        sa.PrimaryKeyConstraint("member_id"),
    )
    op.create_table(
        "home_observations",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("at", sa.Float(), nullable=False),
        sa.Column("source", sa.String(length=32), nullable=False),
        sa.Column("entity", sa.String(length=255), nullable=False),
        sa.Column("topic", sa.String(length=512), nullable=False),
        sa.Column("state", sa.Text(), nullable=False),
        sa.Column("attributes", sa.Text(), nullable=False),
        sa.Column("event_id", sa.String(length=255), nullable=True),
        sa.Column("retained", sa.Boolean(), nullable=False),
        sa.Column("family_id", sa.String(length=64), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("event_id"),
    )
    op.create_index(op.f("ix_home_observations_at"), "home_observations", ["at"], unique=False)
    op.create_table(
        "home_queue",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("scope_id", sa.String(length=255), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("rule_id", sa.String(length=64), nullable=False),
        sa.Column("reason", sa.String(length=16), nullable=False),
        sa.Column("queued_at", sa.Float(), nullable=False),
        sa.Column("release_at", sa.Float(), nullable=False),
        sa.Column("family_id", sa.String(length=64), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index(op.f("ix_home_queue_release_at"), "home_queue", ["release_at"], unique=False)
    op.create_index(op.f("ix_home_queue_scope_id"), "home_queue", ["scope_id"], unique=False)
    op.create_table(
        "home_rule_state",
        sa.Column("rule_id", sa.String(length=64), nullable=False),
        sa.Column("entity", sa.String(length=255), nullable=False),
        sa.Column("matched", sa.Boolean(), nullable=False),
        sa.Column("hold_due", sa.Float(), nullable=True),
        sa.Column("hold_payload", sa.Text(), nullable=True),
        sa.Column("hold_topic", sa.String(length=512), nullable=True),
        sa.Column("last_fired", sa.Float(), nullable=True),
        sa.Column("family_id", sa.String(length=64), nullable=False),
        sa.PrimaryKeyConstraint("rule_id", "entity"),
    )
    op.create_table(
        "list_items",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("scope_id", sa.String(length=200), nullable=False),
        sa.Column("list_name", sa.String(length=40), nullable=False),
        sa.Column("text", sa.String(length=200), nullable=False),
        sa.Column("done", sa.Boolean(), nullable=False),
        sa.Column("added_by", sa.String(length=64), nullable=True),
        sa.Column("added_at", sa.Float(), nullable=False),
        sa.Column("done_by", sa.String(length=64), nullable=True),
        sa.Column("family_id", sa.String(length=64), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("list_items_scope_list", "list_items", ["scope_id", "list_name"], unique=False)
    op.create_table(
        "outbox",
        sa.Column("seq", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("scope_id", sa.String(length=200), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("reply_to", sa.String(length=64), nullable=True),
        sa.Column("in_reply_to_envelope", sa.String(length=64), nullable=True),
        sa.Column("about", sa.String(length=100), nullable=True),
        sa.Column("batch", sa.String(length=32), nullable=True),
        sa.Column("created", sa.DateTime(timezone=True), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("next_attempt_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("state", sa.String(length=8), nullable=False),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("family_id", sa.String(length=64), nullable=False),
        sa.PrimaryKeyConstraint("seq"),
        sa.UniqueConstraint("id"),
    )
    op.create_index(op.f("ix_outbox_scope_id"), "outbox", ["scope_id"], unique=False)
    op.create_index(op.f("ix_outbox_state"), "outbox", ["state"], unique=False)
    op.create_table(
        "pairing_requests",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("code", sa.String(length=16), nullable=False),
        sa.Column("platform", sa.String(length=32), nullable=False),
        sa.Column("platform_user_id", sa.String(length=64), nullable=False),
        sa.Column("display_name", sa.String(length=256), nullable=True),
        sa.Column("username", sa.String(length=256), nullable=True),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("expires_at", sa.Float(), nullable=False),
        sa.Column("decided_at", sa.Float(), nullable=True),
        sa.Column("decided_by", sa.String(length=64), nullable=True),
        sa.Column("member_id", sa.String(length=64), nullable=True),
        sa.Column("family_id", sa.String(length=64), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index(op.f("ix_pairing_requests_code"), "pairing_requests", ["code"], unique=False)
    op.create_table(
        "reminders",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("set_by", sa.String(length=64), nullable=False),
        sa.Column("target", sa.String(length=64), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("scope_id", sa.String(length=200), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("due_at", sa.Float(), nullable=False),
        sa.Column("occurrence_at", sa.Float(), nullable=False),
        sa.Column("every", sa.String(length=40), nullable=True),
        sa.Column("urgent", sa.Boolean(), nullable=False),
        sa.Column("held", sa.Boolean(), nullable=False),
        sa.Column("state", sa.String(length=12), nullable=False),
        sa.Column("fired", sa.Integer(), nullable=False),
        sa.Column("last_fired_at", sa.Float(), nullable=True),
        sa.Column("family_id", sa.String(length=64), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index(op.f("ix_reminders_set_by"), "reminders", ["set_by"], unique=False)
    op.create_index(op.f("ix_reminders_target"), "reminders", ["target"], unique=False)
    op.create_index("reminders_pending_due", "reminders", ["state", "due_at"], unique=False)
    op.create_table(
        "tasks",
        sa.Column("number", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("project", sa.String(length=80), nullable=False),
        sa.Column("title", sa.String(length=300), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("owner", sa.String(length=64), nullable=True),
        sa.Column("scope_id", sa.String(length=128), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
        sa.Column("family_id", sa.String(length=64), nullable=False),
        sa.PrimaryKeyConstraint("number"),
    )
    op.create_index(op.f("ix_tasks_project"), "tasks", ["project"], unique=False)
    op.create_index(op.f("ix_tasks_scope_id"), "tasks", ["scope_id"], unique=False)
    op.create_table(
        "task_notes",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("task_number", sa.Integer(), nullable=False),
        sa.Column("at", sa.Float(), nullable=False),
        sa.Column("event", sa.String(length=16), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("by", sa.String(length=64), nullable=True),
        sa.Column("family_id", sa.String(length=64), nullable=False),
        sa.ForeignKeyConstraint(
            ["task_number"],
            ["tasks.number"],
        ),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index(op.f("ix_task_notes_at"), "task_notes", ["at"], unique=False)
    op.create_index(op.f("ix_task_notes_task_number"), "task_notes", ["task_number"], unique=False)
    op.create_table(
        "telegram_group_notices",
        sa.Column("chat_id", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("at", sa.Float(), nullable=False),
        sa.Column("family_id", sa.String(length=64), nullable=False),
        sa.PrimaryKeyConstraint("chat_id"),
    )
    op.create_table(
        "telegram_updates",
        sa.Column("update_id", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("done_at", sa.Float(), nullable=False),
        sa.Column("family_id", sa.String(length=64), nullable=False),
        sa.PrimaryKeyConstraint("update_id"),
    )
    op.create_table(
        "web_inbox",
        sa.Column("seq", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("scope_id", sa.String(length=200), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("created", sa.DateTime(timezone=True), nullable=False),
        sa.Column("family_id", sa.String(length=64), nullable=False),
        sa.PrimaryKeyConstraint("seq"),
        sa.UniqueConstraint("id"),
    )
    op.create_index(op.f("ix_web_inbox_scope_id"), "web_inbox", ["scope_id"], unique=False)


def downgrade() -> None:
    op.drop_index(op.f("ix_web_inbox_scope_id"), table_name="web_inbox")
    op.drop_table("web_inbox")
    op.drop_table("telegram_updates")
    op.drop_table("telegram_group_notices")
    op.drop_index(op.f("ix_task_notes_task_number"), table_name="task_notes")
    op.drop_index(op.f("ix_task_notes_at"), table_name="task_notes")
    op.drop_table("task_notes")
    op.drop_index(op.f("ix_tasks_scope_id"), table_name="tasks")
    op.drop_index(op.f("ix_tasks_project"), table_name="tasks")
    op.drop_table("tasks")
    op.drop_index("reminders_pending_due", table_name="reminders")
    op.drop_index(op.f("ix_reminders_target"), table_name="reminders")
    op.drop_index(op.f("ix_reminders_set_by"), table_name="reminders")
    op.drop_table("reminders")
    op.drop_index(op.f("ix_pairing_requests_code"), table_name="pairing_requests")
    op.drop_table("pairing_requests")
    op.drop_index(op.f("ix_outbox_state"), table_name="outbox")
    op.drop_index(op.f("ix_outbox_scope_id"), table_name="outbox")
    op.drop_table("outbox")
    op.drop_index("list_items_scope_list", table_name="list_items")
    op.drop_table("list_items")
    op.drop_table("home_rule_state")
    op.drop_index(op.f("ix_home_queue_scope_id"), table_name="home_queue")
    op.drop_index(op.f("ix_home_queue_release_at"), table_name="home_queue")
    op.drop_table("home_queue")
    op.drop_index(op.f("ix_home_observations_at"), table_name="home_observations")
    op.drop_table("home_observations")
    op.drop_table("home_mutes")
    op.drop_index(op.f("ix_home_fired_events_at"), table_name="home_fired_events")
    op.drop_table("home_fired_events")
    op.drop_table("home_entity_state")
    op.drop_table("suspended_groups")
    op.drop_table("group_intruders")
    op.drop_table("discord_noticed_channels")
    op.drop_table("discord_messages")
    op.drop_index(op.f("ix_approvals_state"), table_name="approvals")
    op.drop_table("approvals")
    op.drop_index(op.f("ix_approval_asks_request_id"), table_name="approval_asks")
    op.drop_table("approval_asks")
