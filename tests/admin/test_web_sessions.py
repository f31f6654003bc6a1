"""Dashboard and web chat sessions are rows in halo.db: a browser stays signed in across a
restart, a session expires, and signing out ends it on every process. Only a hash is stored."""

from __future__ import annotations

import aiohttp
from aiohttp import web
from sqlalchemy import select

from admin_api.server import create_app
from halo.runtime.app import build_halo
from halo.web_auth import SESSION_COOKIE, SESSION_SECONDS, DashboardLogin, metadata, sessions_table


async def serve_again(harness) -> tuple[web.AppRunner, str]:
    """The same HALO_HOME served by a freshly built halo: what a restart leaves a browser with."""
    halo = build_halo(harness.halo.settings)
    runner = web.AppRunner(create_app(halo))
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    return runner, f"http://127.0.0.1:{port}"


async def status_with(base: str, cookies: dict[str, str]) -> int:
    async with aiohttp.ClientSession() as http:
        headers = {"Cookie": f"{SESSION_COOKIE}={cookies[SESSION_COOKIE]}"}
        async with http.get(base + "/status", headers=headers) as resp:
            return resp.status


async def test_a_signed_in_browser_stays_signed_in_after_a_restart_until_it_signs_out(admin):
    harness = await admin()
    cookies = await harness.sign_in()
    runner, base = await serve_again(harness)
    try:
        assert await status_with(base, cookies) == 200  # the restarted halo knows the session
        chat = harness.local
        inbox = await chat.call("GET", "/api/chat/inbox", token=None, cookies=cookies)
        assert inbox.status == 200 and inbox.body["member"] == "wags"  # the chat sign-in too
        assert (await harness.local.call("POST", "/logout", token=None, cookies=cookies)).status == 200
        async with harness.halo.db.read(metadata) as conn:
            assert (await conn.execute(select(sessions_table))).all() == []
    finally:
        await runner.cleanup()
    runner, base = await serve_again(harness)  # and after a restart, signed out stays signed out
    try:
        assert await status_with(base, cookies) == 401
    finally:
        await runner.cleanup()


async def test_only_the_hash_of_a_session_is_stored_and_a_session_expires(admin):
    harness = await admin()
    cookies = await harness.sign_in()
    async with harness.halo.db.read(metadata) as conn:
        rows = (await conn.execute(select(sessions_table))).mappings().all()
    assert len(rows) == 1 and cookies[SESSION_COOKIE] not in str(dict(rows[0]))

    clock = [1_000_000.0]
    login = DashboardLogin(harness.halo.paths.logins, harness.halo.db, now=lambda: clock[0])
    session = await login.redeem(login.issue_link_token())
    assert session is not None
    fresh = DashboardLogin(harness.halo.paths.logins, harness.halo.db, now=lambda: clock[0])  # a restart
    await fresh.check(session)
    assert fresh.session_valid(session)
    clock[0] += SESSION_SECONDS + 1
    later = DashboardLogin(harness.halo.paths.logins, harness.halo.db, now=lambda: clock[0])
    await later.check(session)
    assert not later.session_valid(session)


async def test_the_chat_sign_in_with_a_web_token_is_a_stored_session_for_that_member(admin):
    harness = await admin()
    local = harness.local
    wrong = await local.call("POST", "/signin", token=None, json_body={"token": "not-a-token"})
    assert wrong.status == 401 and "not one halo knows" in wrong.body["error"] and "Set-Cookie" not in wrong.headers
    signed = await local.call("POST", "/signin", token=None, json_body={"token": "aarav-token"})
    assert signed.status == 200 and signed.body == {"member": "aarav", "name": "Aarav"}
    cookie = signed.headers["Set-Cookie"]
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
    cookies = {SESSION_COOKIE: cookie.split(";")[0].split("=", 1)[1]}
    async with harness.halo.db.read(metadata) as conn:
        [row] = (await conn.execute(select(sessions_table))).mappings().all()
    assert row["member_id"] == "aarav" and "aarav-token" not in str(dict(row))

    runner, base = await serve_again(harness)  # a restart: Aarav is still signed in, as Aarav
    try:
        async with aiohttp.ClientSession() as http:
            headers = {"Cookie": f"{SESSION_COOKIE}={cookies[SESSION_COOKIE]}"}
            async with http.get(base + "/api/chat/inbox", headers=headers) as resp:
                assert resp.status == 200 and (await resp.json())["member"] == "aarav"
        assert await status_with(base, cookies) == 403  # a child's session opens no admin route
    finally:
        await runner.cleanup()
    assert (await local.call("POST", "/logout", token=None, cookies=cookies)).status == 200
    assert (await local.call("GET", "/api/chat/inbox", token=None, cookies=cookies)).status == 401
