"""GET /tasks: the task list the dashboard's Tasks panel shows, from the real halo.db."""

from __future__ import annotations

from tests.admin.conftest import ADMIN_TOKEN


async def test_tasks_are_listed_with_their_logs_and_can_be_narrowed(admin):
    harness = await admin()
    tasks = harness.halo.tasks
    assert tasks is not None
    await tasks.add("ContextForge", "Write the migration guide", scope_id="discord:3001", by="priya")
    await tasks.add("Halo", "Ship Discord", scope_id="discord:3001", by="wags")
    await tasks.block(2, "waiting for the bot token", by="wags")

    everything = await harness.local.call("GET", "/tasks", token=ADMIN_TOKEN)
    blocked = await harness.local.call("GET", "/tasks?status=blocked", token=ADMIN_TOKEN)
    project = await harness.local.call("GET", "/tasks?project=contextforge", token=ADMIN_TOKEN)
    bad = await harness.local.call("GET", "/tasks?status=someday", token=ADMIN_TOKEN)

    assert everything.status == 200
    assert [(t["number"], t["title"], t["status"]) for t in everything.body] == [
        (1, "Write the migration guide", "todo"),
        (2, "Ship Discord", "blocked"),
    ]
    assert [n["event"] for n in everything.body[1]["notes"]] == ["created", "blocked"]
    assert everything.body[1]["notes"][-1]["text"] == "waiting for the bot token"
    assert [t["number"] for t in blocked.body] == [2]
    assert [t["number"] for t in project.body] == [1]
    assert bad.status == 400 and "status is one of" in bad.body["error"]
    for remote in harness.remotes:
        assert (await remote.call("GET", "/tasks")).status == 401
