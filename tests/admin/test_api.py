"""What each admin endpoint answers, and what it does to the family's data."""

from __future__ import annotations

import json

from tests.admin.conftest import ADMIN_TOKEN, ADMIN_YAML, SEEDED
from tests.admin.fakes import FakeMemory, FakePairing, FakeSemantic
from tests.conftest import llm_yaml


async def test_sessions_list_the_scopes_people_talked_in(admin, fake_llm):
    harness = await admin(ADMIN_YAML + llm_yaml(fake_llm))
    local = harness.local
    for token in ("mom-token", "aarav-token", "mom-token"):
        assert (await local.call("POST", "/api/chat", token=token, json_body={"text": "hello"})).status == 200
    await harness.halo.gateway.drain()

    assert (await local.call("GET", "/sessions")).body == ["web:aarav", "web:mom"]
    counts = (await local.call("GET", "/sessions-with-counts")).body
    assert counts == [{"scopeId": "web:aarav", "itemCount": 2}, {"scopeId": "web:mom", "itemCount": 4}]

    scopes = {s["scopeId"]: s for s in (await local.call("GET", "/scopes")).body}
    assert scopes["web:mom"]["transcriptLines"] == 4 and scopes["web:mom"]["itemCount"] == 4
    assert scopes["web:mom"]["lastActivity"] is not None and scopes["web:mom"]["ownerId"] == "mom"
    assert scopes["telegram:-1001234"] == {  # configured but silent so far
        "scopeId": "telegram:-1001234", "type": "parents_group", "ownerId": None, "configured": True,
        "itemCount": 0, "transcriptLines": 0, "lastActivity": None, "hasMemory": False,
    }


async def test_clear_forgets_the_session_and_keeps_the_transcript(admin):
    harness = await admin()
    await harness.seed()
    reply = await harness.local.call("POST", f"/sessions/{SEEDED}/clear")
    assert reply.body == {"scopeId": SEEDED, "cleared": True, "itemsRemoved": 2}
    assert await harness.services.sessions.all_items(SEEDED) == []
    assert harness.services.transcripts.count(SEEDED) == 2
    event = harness.services.audit.tail(1, kind="admin_clear")[0]
    assert event["scope_id"] == SEEDED and event["actor"] == "admin:local"


async def test_purge_deletes_everything_of_the_scope_and_is_audited(admin):
    harness = await admin()
    memory = FakeMemory()
    harness.attach(memory=memory)
    await harness.seed()
    await harness.seed("web:wags")
    services = harness.services
    folder = services.paths.scope_dir(SEEDED)

    reply = await harness.local.call("POST", f"/sessions/{SEEDED}/purge?confirm={SEEDED}")

    assert reply.status == 200
    assert reply.body == {"scopeId": SEEDED, "purged": {"sessionItems": 2, "transcript": True, "memory": True}}
    assert not folder.exists() and not services.transcripts.path(SEEDED).exists()
    assert await services.sessions.all_items(SEEDED) == []
    assert SEEDED not in (await harness.local.call("GET", "/sessions")).body
    assert memory.forgotten == [SEEDED]  # the memory service dropped its own state for the scope
    event = services.audit.tail(1, kind="admin_purge")[0]
    assert event == {**event, "scope_id": SEEDED, "actor": "admin:local", "transcript": True, "memory": True}
    # Other scopes are untouched.
    assert services.transcripts.count("web:wags") == 2 and services.paths.scope_dir("web:wags").is_dir()
    # It is gone: a second purge finds nothing … except that web:mom is a configured scope, which stays known.
    again = await harness.local.call("POST", f"/sessions/{SEEDED}/purge?confirm={SEEDED}")
    assert again.body["purged"] == {"sessionItems": 0, "transcript": False, "memory": False}


async def test_purge_needs_the_scope_id_repeated(admin):
    harness = await admin()
    await harness.seed()
    local = harness.local
    for query, message in (("", "confirm="), ("?confirm=", "equal"), ("?confirm=web:wags", "equal"),
                           (f"?confirm={SEEDED.upper()}", "equal"), (f"?confirm={SEEDED}%20", "equal")):
        reply = await local.call("POST", f"/sessions/{SEEDED}/purge{query}")
        assert reply.status == 400, query
        assert message in reply.body["error"]
    assert harness.services.transcripts.count(SEEDED) == 2
    assert harness.services.paths.scope_dir(SEEDED).is_dir()
    assert harness.services.audit.tail(5, kind="admin_purge") == []


async def test_bad_and_unknown_scope_ids(admin):
    harness = await admin()
    await harness.seed()
    local = harness.local
    for bad in ("nocolon", "web:", "telegram:abc", "mars:1", "web:mom%20x", "x" * 201, "telegram:%0A1"):
        for method, path in (("POST", f"/sessions/{bad}/clear"), ("POST", f"/sessions/{bad}/distill"),
                             ("POST", f"/sessions/{bad}/purge?confirm={bad}"), ("GET", f"/scopes/{bad}/memory"),
                             ("GET", f"/events?scopeId={bad}"), ("GET", f"/transcripts/tail?scopeId={bad}")):
            reply = await local.call(method, path)
            assert reply.status == 400, (method, path, reply.text)
            assert set(reply.body) == {"error"}
    for unknown in ("telegram:999999", "discord:42", "web:nobody", "home:garage"):
        for method, path in (("POST", f"/sessions/{unknown}/clear"), ("POST", f"/sessions/{unknown}/distill"),
                             ("POST", f"/sessions/{unknown}/purge?confirm={unknown}"),
                             ("GET", f"/scopes/{unknown}/memory"), ("GET", f"/events?scopeId={unknown}"),
                             ("GET", f"/transcripts/tail?scopeId={unknown}")):
            reply = await local.call(method, path)
            assert reply.status == 404, (method, path, reply.text)
    assert (await local.call("GET", "/events")).status == 400  # scopeId is required
    assert (await local.call("GET", "/transcripts/tail")).status == 400


async def test_distill_is_409_when_disabled(admin):
    harness = await admin(ADMIN_YAML + "memory: {distillation_enabled: false}\n")
    memory = FakeMemory()
    harness.attach(memory=memory)
    await harness.seed()
    reply = await harness.local.call("POST", f"/sessions/{SEEDED}/distill")
    assert reply.status == 409
    assert "memory.distillation_enabled" in reply.body["error"]
    assert memory.distilled == []


async def test_distill_runs_the_memory_service(admin):
    harness = await admin()
    memory = FakeMemory()
    harness.attach(memory=memory)
    await harness.seed()
    reply = await harness.local.call("POST", f"/sessions/{SEEDED}/distill")
    assert reply.status == 200
    assert reply.body == {"scopeId": SEEDED, "distilled": True,
                          "result": {"facts_added": 2, "watermark": 1234, "ran_at": "2026-01-02T03:04:00+00:00"}}
    assert memory.distilled == [SEEDED]
    assert harness.services.audit.tail(1, kind="admin_distill")[0]["scope_id"] == SEEDED


async def test_status_masks_every_secret(admin, fake_llm):
    secrets = {
        "llm-key": "sk-live-llm-key-1", "tg": "123456:telegram-bot-token", "dc": "discord-token-abc",
        "url-pass": "hunter2-in-a-url",
    }
    yaml = f"""\
admin: {{token: {ADMIN_TOKEN}}}
llm: {{provider: openai-compatible, model: m, base_url: "http://user:{secrets['url-pass']}@127.0.0.1:1/v1",
      api_key: {secrets['llm-key']}}}
telegram: {{token: "{secrets['tg']}", base_url: "http://127.0.0.1:1"}}
discord: {{token: {secrets['dc']}}}
"""
    harness = await admin(yaml)
    reply = await harness.remotes[0].call("GET", "/status", token=ADMIN_TOKEN)
    assert reply.status == 200
    for secret in [*secrets.values(), ADMIN_TOKEN, "mom-token", "wags-token", "aarav-token", "priya-token"]:
        assert secret not in reply.text, f"{secret} leaked"
    status = reply.body
    assert status["config"]["llm"]["api_key"] == "**********"
    assert status["config"]["telegram"]["token"] == "**********"
    assert status["config"]["admin"]["token"] == "**********"
    assert status["config"]["members"][0]["web_token"] == "**********"
    assert status["config"]["sessions"]["history_token_budget"] == 4000  # a number is not a secret
    assert status["provider"] == {"name": "openai-compatible", "model": "m",
                                  "base_url": "http://user:**********@127.0.0.1:1/v1", "configured": True}
    assert status["halo_home"]["home"] == str(harness.halo.settings.home)
    assert status["adapters"]["web"]["connected"] is True
    assert status["semantic"]["enabled"] is True and status["semantic"]["runs"] == 0  # the real index, idle
    assert status["distillation"]["available"] is True
    assert status["distillation"]["enabled"] is True and status["distillation"]["every_n_items"] == 20
    assert status["queues"] == {"gateway_background_tasks": 0, "busy_scopes": 0, "pending_pairing_requests": 0,
                                "undelivered_notifications": 0}
    assert status["uptime_seconds"] >= 0 and status["version"]


async def test_status_shows_the_plugged_in_parts(admin):
    harness = await admin(ADMIN_YAML + "llm: {provider: none}\n")
    harness.attach(memory=FakeMemory(), pairing=FakePairing("AAAA1111", "BBBB2222"), semantic=FakeSemantic())
    status = (await harness.local.call("GET", "/status")).body
    assert status["semantic"]["runs"] == 12 and status["semantic"]["enabled"] is True
    assert status["distillation"]["available"] is True
    assert status["distillation"]["scopes"]["web:mom"]["distill"]["last_run"] == "2026-01-02T03:04:00+00:00"
    assert status["pairing"] == {"available": True, "pending": 2}
    assert status["queues"]["pending_pairing_requests"] == 2
    assert any("language model" in p for p in status["problems"])


async def test_policy_status_explains_every_member_in_every_configured_scope(admin):
    harness = await admin()
    audit_before = len(harness.services.audit.tail(1000))
    body = (await harness.local.call("GET", "/policy/status")).body
    family = harness.services.family
    assert [m["id"] for m in body["members"]] == [m.id for m in family.members]
    scopes = {s["scopeId"]: s for s in body["scopes"]}
    assert {"web:mom", "telegram:1002", "telegram:-1001234", "discord:3001", "web:tara"} <= set(scopes)

    def decision(scope: str, who: str, action: str) -> dict:
        found = [d for d in scopes[scope]["decisions"] if d["principal"] == who and d["action"] == action]
        assert len(found) == 1
        return found[0]

    for scope in scopes.values():  # every member × every member action, and halo's own proactive decision
        pairs = {(d["principal"], d["action"]) for d in scope["decisions"]}
        assert {(m.id, a) for m in family.members for a in body["actions"] if a != "receive_proactive"} <= pairs
        assert ("system:home", "receive_proactive") in pairs
    assert decision("web:mom", "mom", "converse") == {
        "principal": "mom", "action": "converse", "allowed": True, "policyIds": ["own-dm"],
        "reason": "A member may always talk to halo in their own DM.", "fromScope": None,
    }
    child_in_group = decision("telegram:-1001234", "aarav", "converse")
    assert not child_in_group["allowed"] and "parents-group-parents-only" in child_in_group["policyIds"]
    assert decision("web:tara", "mom", "read_transcript")["allowed"]  # a young child's transcript
    assert not decision("web:aarav", "mom", "read_transcript")["allowed"]  # an adolescent without visibility
    assert not decision("web:aarav", "system:home", "receive_proactive")["allowed"]
    assert decision("telegram:-1001234", "mom", "share")["fromScope"] == "web:mom"
    assert any(p["id"] == "own-dm" and p["source"] == "policy/family.cedar" for p in body["policies"])
    assert len(harness.services.audit.tail(1000)) == audit_before  # probes are not audited


async def test_events_by_scope_and_tail(admin):
    harness = await admin()
    await harness.seed()
    audit = harness.services.audit
    audit.write("provider_error", scope_id="web:wags", error="boom")
    audit.write("policy", principal="aarav", action="converse", resource="telegram:-1001234",
                from_scope=SEEDED, allowed=False, policy_ids=["x"], reason="r")
    about_mom = (await harness.local.call("GET", f"/events?scopeId={SEEDED}")).body
    assert [e["kind"] for e in about_mom] == ["policy", "policy"]  # the seeded one and the from_scope one
    assert all(SEEDED in (e.get("scope_id"), e.get("resource"), e.get("from_scope")) for e in about_mom)
    tail = (await harness.local.call("GET", "/events/tail?lines=2")).body
    assert [e["kind"] for e in tail] == ["provider_error", "policy"]
    assert len((await harness.local.call("GET", "/events/tail")).body) == 3
    for bad in ("0", "-1", "1001", "abc", "1.5", ""):
        reply = await harness.local.call("GET", f"/events/tail?lines={bad}")
        assert reply.status == 400 and "lines" in reply.body["error"], bad


async def test_transcript_tail_is_audited(admin):
    harness = await admin()
    await harness.seed()
    lines = (await harness.local.call("GET", f"/transcripts/tail?scopeId={SEEDED}&lines=1")).body
    assert [(line["role"], line["text"]) for line in lines] == [("assistant", "Noted: dentist on Friday.")]
    event = harness.services.audit.tail(1, kind="admin_read_transcript")[0]
    assert event["scope_id"] == SEEDED and event["lines"] == 1


async def test_memory_is_read_as_it_is_on_disk(admin):
    harness = await admin()
    await harness.seed()
    local = harness.local
    memory = (await local.call("GET", f"/scopes/{SEEDED}/memory")).body
    assert memory["exists"] and memory["text"].startswith("# Memory") and not memory["truncated"]
    assert memory["updatedAt"] is not None
    assert harness.services.audit.tail(1, kind="admin_read_memory")[0]["scope_id"] == SEEDED
    empty = (await local.call("GET", "/scopes/web:wags/memory")).body  # configured, nothing written yet
    assert empty == {"scopeId": "web:wags", "exists": False, "text": "", "updatedAt": None, "truncated": False}
    big = harness.services.paths.scope_dir(SEEDED) / "MEMORY.md"
    big.write_text("x" * (600 * 1024))
    assert (await local.call("GET", f"/scopes/{SEEDED}/memory")).body["truncated"] is True


async def test_pairing_without_a_pairing_service(admin):
    harness = await admin()
    local = harness.local
    assert (await local.call("GET", "/pairing/requests")).body == []
    for action in ("approve", "deny"):
        reply = await local.call("POST", f"/pairing/requests/ABCD2345/{action}",
                                 json_body={"role": "child", "name": "Meera"})
        assert reply.status == 501 and "Telegram" in reply.body["error"]


async def test_pairing_list_approve_and_deny(admin):
    harness = await admin()
    pairing = FakePairing("K7PQ2MZX", "W3RT9ABC")
    harness.attach(pairing=pairing)
    local = harness.local
    listed = (await local.call("GET", "/pairing/requests")).body
    assert [r["code"] for r in listed] == ["K7PQ2MZX", "W3RT9ABC"]
    assert listed[0]["displayName"] == "Cousin Meera" and listed[0]["userId"] == "5550001"
    assert listed[0]["platform"] == "telegram" and listed[0]["username"] == "meera"
    assert listed[0]["requestedAt"] and listed[0]["expiresAt"]

    for body, message in (({"role": "boss", "name": "M"}, "role"), ({"role": "child"}, "name"),
                          ({"role": "child", "name": "  "}, "name"), ({"role": "parent", "name": "M",
                           "ageGroup": "adolescent"}, "ageGroup"), ([1, 2], "object")):
        reply = await local.call("POST", "/pairing/requests/K7PQ2MZX/approve", json_body=body)
        assert reply.status == 400 and message in reply.body["error"], body
    assert (await local.call("POST", "/pairing/requests/bad%20code/approve",
                             json_body={"role": "child", "name": "M"})).status == 400
    unknown = await local.call("POST", "/pairing/requests/ZZZZ9999/approve", json_body={"role": "child", "name": "M"})
    assert unknown.status == 404 and "ZZZZ9999" in unknown.body["error"]

    approved = await local.call("POST", "/pairing/requests/K7PQ2MZX/approve",
                                json_body={"role": "child", "name": "Meera", "ageGroup": "adolescent"})
    assert approved.status == 200
    assert approved.body["approved"] is True and approved.body["member"]["role"] == "child"
    assert pairing.approved[0] == {**pairing.approved[0], "code": "K7PQ2MZX", "approved_by": "admin:local",
                                   "age_group": "adolescent"}
    assert (await local.call("POST", "/pairing/requests/W3RT9ABC/deny")).body == {"code": "W3RT9ABC", "denied": True}
    assert pairing.denied == [{"code": "W3RT9ABC", "denied_by": "admin:local"}]
    assert (await local.call("GET", "/pairing/requests")).body == []
    kinds = [e["kind"] for e in harness.services.audit.tail(2)]
    assert kinds == ["admin_pairing_approve", "admin_pairing_deny"]


async def test_remote_admin_actions_name_the_peer_not_the_token(admin):
    harness = await admin()
    await harness.seed()
    remote = harness.remotes[0]
    assert (await remote.call("POST", f"/sessions/{SEEDED}/clear", token=ADMIN_TOKEN)).status == 200
    event = harness.services.audit.tail(1, kind="admin_clear")[0]
    assert event["actor"].startswith("admin:token@") and ADMIN_TOKEN not in json.dumps(event)


async def test_errors_are_json_and_never_a_traceback(admin):
    harness = await admin()
    local = harness.local
    missing = await local.call("GET", "/no/such/thing")
    assert missing.status == 404 and set(missing.body) == {"error"}
    wrong_method = await local.call("DELETE", "/status")
    assert wrong_method.status == 405 and wrong_method.headers["Allow"] == "GET"
    assert set(wrong_method.body) == {"error"}

    class Broken:
        def distill(self, scope_id: str) -> None:
            raise RuntimeError("secret internals /home/x/.halo")

        async def close(self) -> None:
            return None

    harness.attach(memory=Broken())
    await harness.seed()
    reply = await local.call("POST", f"/sessions/{SEEDED}/distill")
    assert reply.status == 500
    assert reply.body == {"error": "internal error (see the server log)"}
    assert "Traceback" not in reply.text and "secret internals" not in reply.text
    assert reply.headers["Cache-Control"] == "no-store"


async def test_dashboard_page_and_its_guard(admin):
    harness = await admin()
    page = await harness.local.call("GET", "/", headers={"Accept": "text/html"})
    assert page.status == 200 and page.headers["Content-Type"].startswith("text/html")
    csp = page.headers["Content-Security-Policy"]
    assert "default-src 'none'" in csp and "script-src 'sha256-" in csp and "unsafe-inline" not in csp
    assert "frame-ancestors 'none'" in csp
    remote = harness.remotes[0]
    as_json = await remote.call("GET", "/")
    assert as_json.status == 401 and set(as_json.body) == {"error"}
    assert as_json.headers["WWW-Authenticate"].startswith("Bearer")
    with_token = await remote.call("GET", "/", token=ADMIN_TOKEN)
    assert with_token.status == 200 and "<title>halo" in with_token.text
