"""halo.yaml edits take effect without a restart: the file watcher, POST /reload and `halo
reload`, and SIGHUP. halo runs for real (its aiohttp app on 127.0.0.1; once as `halo serve` in
its own process); the file is edited the way a person does, by writing it."""

from __future__ import annotations

import json
import logging
import signal
import urllib.request
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from config.settings import Settings
from halo.port import Observation
from tests.audit_support import audit_events
from tests.conftest import FAMILY_YAML, OWNER_AUTH, free_port
from tests.memory_files import read_memory
from tests.test_serve_cli import halo, halo_cmd, wait_healthy
from tests.waiting import eventually

PRIYA = "  - {id: priya, name: Priya, role: colleague, discord_user_id: 2001, web_token: priya-token}\n"
NANI = "  - {id: nani,  name: Nani,  role: parent, web_token: nani-token}\n"
RULE = """\
home:
  rules:
    - id: {rule_id}
      when: {{topic: zigbee2mqtt/basement_leak, field: water_leak, equals: true}}
      say: "Water leak!"
      to: [parents]
"""


def with_nani(text: str) -> str:
    return text.replace(PRIYA, PRIYA + NANI)


async def get(running: Any, path: str, headers: dict[str, str] = OWNER_AUTH) -> tuple[int, Any]:
    async with running.http.get(running.url(path), headers=headers) as response:
        return response.status, await response.json()


async def reload_status(running: Any) -> dict[str, Any]:
    code, status = await get(running, "/status")
    assert code == 200
    return status


@pytest.fixture
async def live(serve_halo: Callable[[Settings], Any], settings_for: Callable[..., Settings]) -> Any:
    running = await serve_halo(settings_for(RULE.format(rule_id="leak")))
    await running.halo.start()
    return running


async def test_a_new_member_and_a_changed_rule_work_without_a_restart(live, home: Path):
    config = home / "halo.yaml"
    assert (await live.chat("/whoami", token="nani-token"))[0] == 401

    config.write_text(with_nani(config.read_text()).replace("id: leak", "id: basement-leak"))

    await eventually(lambda: live.halo.config.reloads == 1, what="the watcher applying the edit")
    code, body = await live.chat("/whoami", token="nani-token")
    assert code == 200 and "Nani" in body["reply"]
    assert "# Nani" in await read_memory(live.halo, "members/nani/USER.md")  # her profile, to fill in
    code, rules = await get(live, "/home/rules")
    assert [r["id"] for r in rules["rules"]] == ["basement-leak"]
    # the edited rule is the one that judges the house now, and reaches the new parent too
    leak = Observation(
        "zigbee2mqtt/basement_leak", "zigbee2mqtt", "basement_leak", {"water_leak": True}, datetime.now(UTC)
    )
    await live.halo.home.observe(leak)
    await live.halo.delivery.drain()
    nani = {"Authorization": "Bearer nani-token"}
    assert [m["text"] for m in (await get(live, "/api/chat/inbox", nani))[1]["messages"]] == ["Water leak!"]
    assert {r["id"]: r for r in live.halo.home.rules_report()}["basement-leak"]["fired"] == 1
    status = await reload_status(live)
    assert "nani" in [m["id"] for m in status["config"]["members"]]
    assert status["config_reload"]["last_trigger"] == "watch" and status["config_reload"]["error"] is None
    assert status["problems"] == [p for p in status["problems"] if "halo.yaml" not in p]


async def test_a_broken_edit_keeps_the_running_config_and_says_which_key(live, home: Path, caplog):
    caplog.set_level(logging.ERROR, logger="halo.workspace.config_reload")
    config = home / "halo.yaml"
    good = config.read_text()
    config.write_text(with_nani(good).replace("role: parent, web_token: nani-token", "role: grandma, web_token: x"))

    await eventually(lambda: live.halo.config.error, what="the watcher refusing the edit")
    status = await reload_status(live)
    [problem] = [p for p in status["problems"] if "halo.yaml" in p]
    assert "was not applied" in problem and "members.5.role" in problem
    assert "members.5.role" in status["config_reload"]["error"]
    assert any("members.5.role" in r.getMessage() for r in caplog.records)
    # what ran before still runs: the owner chats, the rule is the old one, nobody new
    assert (await live.chat("/whoami"))[0] == 200
    assert [r["id"] for r in (await get(live, "/home/rules"))[1]["rules"]] == ["leak"]
    assert len(live.halo.family.members) == 5

    config.write_text(with_nani(good))  # fixed: applied, and the problem is gone
    await eventually(lambda: live.halo.config.reloads == 1 and live.halo.config.error is None, what="the fix")
    assert (await live.chat("/whoami", token="nani-token"))[0] == 200
    assert not [p for p in (await reload_status(live))["problems"] if "halo.yaml" in p]


async def test_a_key_that_needs_a_restart_is_reported_not_half_applied(live, home: Path):
    config = home / "halo.yaml"
    config.write_text(config.read_text() + "admin: {port: 9999}\ntools: {search_results: 3}\n")

    await eventually(lambda: live.halo.config.reloads == 1, what="the edit")
    status = await reload_status(live)
    assert status["config_reload"]["restart_needed"] == ["admin", "tools"]
    assert "halo.yaml changed admin, tools: restart halo for that to take effect." in status["problems"]
    assert status["config"]["admin"]["port"] == live.halo.settings.admin.port != 9999
    assert "members" in status["config_reload"]["live"] and "llm" in status["config_reload"]["needs_restart"]


async def test_post_reload_applies_now_or_refuses_naming_the_key(live, home: Path):
    config = home / "halo.yaml"
    live.halo.config.poll_seconds = 3600.0  # this test asks; the watcher does not get there first
    await live.halo.config.close()
    config.write_text(with_nani(config.read_text()))

    async with live.http.post(live.url("/reload"), headers=OWNER_AUTH) as response:
        assert response.status == 200 and await response.json() == {"applied": True, "restartNeeded": []}
    assert (await live.chat("/whoami", token="nani-token"))[0] == 200

    config.write_text(config.read_text().replace("{name: Sharma}", "{name: Sharma, timezone: Mars/Base}"))
    async with live.http.post(live.url("/reload"), headers=OWNER_AUTH) as response:
        assert response.status == 422
        assert "family.timezone" in (await response.json())["error"]
    child = {"Authorization": "Bearer aarav-token"}
    async with live.http.post(live.url("/reload"), headers=child) as response:
        assert response.status == 403
    assert (await live.chat("/whoami", token="nani-token"))[0] == 200  # still the running config
    assert await audit_events(live.halo, kind="config_reload")


def status_of(port: int) -> dict[str, Any]:
    request = urllib.request.Request(f"http://127.0.0.1:{port}/status", headers=OWNER_AUTH)
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.load(response)  # type: ignore[no-any-return]


@pytest.mark.slow  # starts a process
def test_sighup_and_halo_reload_apply_halo_yaml_to_a_running_serve(tmp_path: Path, capsys, monkeypatch):
    home = tmp_path / "home"
    home.mkdir()
    config = home / "halo.yaml"
    config.write_text(FAMILY_YAML)
    port = free_port()
    proc = halo_cmd("serve", home=home, port=port)
    try:
        wait_healthy(port, proc)
        proc.send_signal(signal.SIGHUP)
        # the other process's state, polled: there is no event to wait on from outside it
        assert _poll(lambda: status_of(port)["config_reload"]["reloads"] == 1), "SIGHUP did not reload"
        assert status_of(port)["config_reload"]["last_trigger"] == "signal"

        config.write_text(with_nani(FAMILY_YAML))
        monkeypatch.setenv("HALO_ADMIN__PORT", str(port))
        code, out, err = halo("reload", home=home, capsys=capsys, monkeypatch=monkeypatch)
        assert (code, out) == (0, "halo.yaml applied.\n"), err
        # applied when `halo reload` returned: Nani's token opens the web chat at once
        request = urllib.request.Request(
            f"http://127.0.0.1:{port}/api/chat",
            data=json.dumps({"text": "/whoami"}).encode(),
            headers={"Content-Type": "application/json", "Authorization": "Bearer nani-token"},
        )
        with urllib.request.urlopen(request, timeout=60) as response:
            assert "Nani" in json.load(response)["reply"]

        config.write_text(with_nani(FAMILY_YAML).replace("role: colleague", "role: boss"))
        code, out, err = halo("reload", home=home, capsys=capsys, monkeypatch=monkeypatch)
        assert code == 1 and "halo.yaml was not applied" in err and "members.4.role" in err
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)


def _poll(check: Callable[[], bool], within: float = 30.0) -> bool:
    import time

    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.05)  # another process's state: polled, as wait_healthy does
    return False
