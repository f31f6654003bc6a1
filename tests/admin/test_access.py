"""Who may call what, for every route: every kind of credential (none, a child's, a colleague's,
a parent's web token, the admin token, the dashboard cookie), from this machine and from a
remote peer, and a remote peer pretending to be local with forwarded-for headers.

Remote peers are made at the socket (see peers.py), never with a header.
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, field
from typing import Any

import pytest

from admin_api.routes import admin_routes
from halo.access import is_loopback_address
from halo.web_auth import SESSION_COOKIE, DashboardLogin, dashboard_link
from tests.admin.conftest import ADMIN_TOKEN, SEEDED, AdminHarness, seed_document
from tests.admin.peers import PeerSite

FORGED = {
    "X-Forwarded-For": "127.0.0.1",
    "X-Real-IP": "127.0.0.1",
    "Forwarded": "for=127.0.0.1;host=127.0.0.1",
    "X-Forwarded-Host": "127.0.0.1",
}


@dataclass(frozen=True)
class Example:
    """A request that succeeds from this machine on a seeded halo. `{code}` in the path is
    the code of a real pending pairing request, made afresh whenever the last was decided."""

    path: str
    json_body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    ok: int = 200


EXAMPLES: dict[tuple[str, str], Example] = {
    ("GET", "/healthz"): Example("/healthz"),
    ("GET", "/livez"): Example("/livez"),
    ("GET", "/readyz"): Example("/readyz"),
    ("GET", "/active"): Example("/active"),
    ("GET", "/status"): Example("/status"),
    ("GET", "/sessions"): Example("/sessions"),
    ("GET", "/sessions-with-counts"): Example("/sessions-with-counts"),
    ("GET", "/scopes"): Example("/scopes"),
    ("POST", "/sessions/{scopeId}/clear"): Example(f"/sessions/{SEEDED}/clear"),
    ("POST", "/sessions/{scopeId}/distill"): Example(f"/sessions/{SEEDED}/distill"),
    ("POST", "/sessions/{scopeId}/purge"): Example(f"/sessions/{SEEDED}/purge?confirm={SEEDED}"),
    ("GET", "/policy/status"): Example("/policy/status"),
    ("GET", "/events"): Example(f"/events?scopeId={SEEDED}&lines=5"),
    ("GET", "/events/tail"): Example("/events/tail?lines=5"),
    ("GET", "/transcripts/tail"): Example(f"/transcripts/tail?scopeId={SEEDED}&lines=5"),
    ("GET", "/scopes/{scopeId}/memory"): Example(f"/scopes/{SEEDED}/memory"),
    ("PUT", "/scopes/{scopeId}/memory"): Example(f"/scopes/{SEEDED}/memory", json_body={"text": "# Memory\n"}),
    ("GET", "/members/{memberId}/profile"): Example("/members/mom/profile"),
    ("PUT", "/members/{memberId}/profile"): Example("/members/mom/profile", json_body={"text": "# Mom\n"}),
    ("GET", "/soul"): Example("/soul"),
    ("PUT", "/soul"): Example("/soul", json_body={"text": "# SOUL\n"}),
    ("GET", "/scopes/{scopeId}/files"): Example(f"/scopes/{SEEDED}/files"),
    ("DELETE", "/scopes/{scopeId}/files/{number}"): Example(f"/scopes/{SEEDED}/files/1"),
    ("GET", "/memory/graph"): Example(f"/memory/graph?scopeId={SEEDED}"),
    ("GET", "/pairing/requests"): Example("/pairing/requests"),
    ("GET", "/tasks"): Example("/tasks"),
    ("GET", "/reminders"): Example("/reminders"),
    ("DELETE", "/reminders/{id}"): Example("/reminders/1"),
    ("GET", "/lists"): Example("/lists"),
    ("GET", "/usage"): Example("/usage"),
    ("POST", "/pairing/requests/{code}/approve"): Example(
        "/pairing/requests/{code}/approve", json_body={"role": "child", "name": "Meera", "ageGroup": "adolescent"}
    ),
    ("POST", "/pairing/requests/{code}/deny"): Example("/pairing/requests/{code}/deny"),
    ("GET", "/"): Example("/", headers={"Accept": "text/html"}),
    ("GET", "/openapi.json"): Example("/openapi.json"),
    ("GET", "/family/transcripts"): Example("/family/transcripts"),
    ("GET", "/family/transcript"): Example("/family/transcript?scopeId=web:tara&lines=5"),
    ("GET", "/family/notifications"): Example("/family/notifications"),
    ("GET", "/home/observations"): Example("/home/observations"),
    ("GET", "/home/rules"): Example("/home/rules"),
    ("GET", "/login"): Example("/login?token={login}", ok=303),
    ("POST", "/signin"): Example("/signin", json_body={"token": "mom-token"}),
    ("POST", "/logout"): Example("/logout"),
    ("GET", "/backups"): Example("/backups"),
    ("POST", "/backups"): Example("/backups", ok=201),
    ("POST", "/reload"): Example("/reload"),
}
ROUTES = {(r.method, r.path): r for r in admin_routes()}


def test_every_route_has_an_example():
    assert set(EXAMPLES) == set(ROUTES)


async def ready(admin: Any) -> AdminHarness:
    harness = await admin()
    await harness.seed()
    return harness


CREDENTIALS: dict[str, dict[str, Any]] = {
    "no credential": {"token": None},
    "a wrong token": {"token": "not-the-token"},
    "the admin token's first characters": {"token": ADMIN_TOKEN[:-1]},
    "forwarded-for headers": {"token": None, "headers": FORGED},
    "a child's token": {"token": "aarav-token"},
    "a colleague's token": {"token": "priya-token"},
    "a parent's web token": {"token": "mom-token"},
    "the admin token": {"token": ADMIN_TOKEN},
    "the dashboard cookie": {"token": None, "cookie": True},
    "a forged cookie": {"token": None, "cookies": {SESSION_COOKIE: "made-up"}},
}
PARENT = {"a parent's web token", "the admin token", "the dashboard cookie"}
NOT_PARENT = {"a child's token", "a colleague's token"}


def expected_status(access: str, credential: str, local: bool) -> int | None:
    """What §7 says a caller gets; None: whatever the policy decides (a member route), not 401."""
    if access == "anyone":
        return 200
    if access == "member":
        if credential in ("a parent's web token", "the dashboard cookie"):
            return 200
        return None if credential in NOT_PARENT else 401
    if access == "loopback" and not local:
        return 403
    if credential in PARENT:
        return 200
    return 403 if credential in NOT_PARENT else 401


@pytest.mark.parametrize("key", sorted(ROUTES), ids=lambda k: f"{k[0]} {k[1]}")
async def test_route_access(key: tuple[str, str], admin):
    """Every route × every kind of credential × this machine and a remote peer."""
    method, _ = key
    access = ROUTES[key].access
    example = EXAMPLES[key]
    harness = await ready(admin)
    cookies = await harness.sign_in()
    newcomers = itertools.count(5550001)

    async def call(endpoint, credential: dict[str, Any], succeeds: bool):
        path = example.path
        if "{code}" in path:  # a success decides the request: then a new stranger asks
            pending = await harness.services.pairing.list_pending()
            path = path.replace("{code}", pending[0].code if pending else await harness.stranger(next(newcomers)))
        if "{login}" in path:
            path = path.replace("{login}", DashboardLogin(harness.services.paths.logins).issue_link_token())
        if succeeds and "/purge" in path and harness.services.transcripts.count(SEEDED) == 0:
            await harness.seed()  # purged by the last caller who could
        if "/files/" in path and not await harness.services.documents.list(SEEDED):
            await seed_document(harness.services)  # deleted by the last caller who could
        return await endpoint.call(
            method,
            path,
            token=credential["token"],
            json_body=example.json_body,
            headers={**example.headers, **credential.get("headers", {})},
            cookies=cookies if credential.get("cookie") else credential.get("cookies"),
        )

    async def decisions() -> int:
        return sum(
            [len(await harness.services.audit.tail(100, kind=k)) for k in ("pairing_approved", "pairing_denied")]
        )

    for endpoint in (harness.local, *harness.remotes):
        local = endpoint is harness.local
        for case, credential in CREDENTIALS.items():
            expected = expected_status(access, case, local)
            decided, lines = await decisions(), harness.services.transcripts.count(SEEDED)
            reply = await call(endpoint, credential, succeeds=expected == 200)
            where = f"{endpoint.mode} peer, {case}"
            if expected is None:
                assert reply.status in (200, 403), f"{where}: {reply.status} {reply.text[:200]}"
                continue
            expected = example.ok if expected == 200 else expected
            assert reply.status == expected, f"{where}: {reply.status} {reply.text[:200]}"
            if expected == example.ok:
                continue
            if key == ("GET", "/") and expected == 401:  # a browser gets the sign-in page, with no data in it
                assert "Sign in" in reply.text and "mom" not in reply.text.lower()
            else:
                assert set(reply.body) == {"error"}, f"{where}: errors are JSON"
            assert await decisions() == decided, f"{where}: a refused caller decided a join request"
            assert harness.services.transcripts.count(SEEDED) == lines, f"{where}: a refused caller purged"
            if "/files/" in example.path:
                assert await harness.services.documents.list(SEEDED), f"{where}: a refused caller deleted a file"


async def test_a_childs_token_cannot_purge_another_childs_chat(admin):
    """The probe from issue 15: from the family computer, a child's token purged a chat with 200."""
    harness = await admin()
    await harness.seed("telegram:1004")
    for token in ("aarav-token", "priya-token", None):
        reply = await harness.local.call("POST", "/sessions/telegram:1004/purge?confirm=telegram:1004", token=token)
        assert reply.status == (401 if token is None else 403), reply.text
        tail = await harness.local.call("GET", "/transcripts/tail?scopeId=web:mom&lines=5", token=token)
        assert tail.status in (401, 403)
    assert harness.services.transcripts.count("telegram:1004") == 2


async def test_a_login_link_works_once_and_expires(admin):
    harness = await admin()
    login = DashboardLogin(harness.services.paths.logins)
    token = login.issue_link_token()
    first = await harness.local.call("GET", f"/login?token={token}", token=None)
    assert first.status == 303 and first.headers["Location"] == "/"
    again = await harness.local.call("GET", f"/login?token={token}", token=None)
    assert again.status == 401 and again.headers["Content-Type"].startswith("text/html")
    assert "uv run halo dashboard" in again.text and "used already or has expired" in again.text
    clock = [1_000_000.0]
    stale = DashboardLogin(harness.services.paths.logins, now=lambda: clock[0])
    old = stale.issue_link_token()
    clock[0] += 16 * 60
    assert await stale.redeem(old) is None
    assert not list(harness.services.paths.logins.glob("*")) or all(
        p.stat().st_mode & 0o077 == 0 for p in harness.services.paths.logins.iterdir()
    )


async def test_login_links_do_not_pile_up_in_halo_home_across_serve_starts(admin):
    harness = await admin()
    folder, settings = harness.services.paths.logins, harness.halo.settings
    asked = dashboard_link(settings)  # `halo dashboard`, before the restarts
    links = [dashboard_link(settings, ("127.0.0.1", 8765)) for _ in range(12)]  # what each serve start prints
    assert len(list(folder.iterdir())) == 2  # the last start's link and the one asked for
    for earlier in links[:-1]:
        assert (await harness.local.call("GET", _path(earlier), token=None)).status == 401
    for fresh in (links[-1], asked):
        assert (await harness.local.call("GET", _path(fresh), token=None)).status == 303
    assert list(folder.iterdir()) == []  # redeemed links are gone, and work once
    assert (await harness.local.call("GET", _path(asked), token=None)).status == 401

    clock = [time.time()]
    login = DashboardLogin(folder, now=lambda: clock[0])
    unused = [login.issue_link_token() for _ in range(3)]
    clock[0] += 16 * 60
    kept = login.issue_link_token()  # expired ones go when a new one is made
    assert len(list(folder.iterdir())) == 1 and all([await login.redeem(token) is None for token in unused])
    assert await login.redeem(kept) is not None


def _path(link: str) -> str:
    return "/login?" + link.split("?", 1)[1]


async def test_the_session_cookie_is_httponly_and_strict(admin):
    harness = await admin()
    token = DashboardLogin(harness.services.paths.logins).issue_link_token()
    async with harness.http.get(f"{harness.local.base}/login?token={token}", allow_redirects=False) as resp:
        assert resp.status == 303 and resp.headers["Location"] == "/"
        cookie = resp.headers["Set-Cookie"]
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
    cookies = {SESSION_COOKIE: cookie.split(";")[0].split("=", 1)[1]}
    assert (await harness.local.call("GET", "/status", token=None, cookies=cookies)).status == 200
    cross = {"Sec-Fetch-Site": "cross-site"}
    assert (await harness.local.call("GET", "/status", token=None, cookies=cookies, headers=cross)).status == 401
    assert (await harness.local.call("POST", "/logout", token=None, cookies=cookies)).status == 200
    assert (await harness.local.call("GET", "/status", token=None, cookies=cookies)).status == 401


async def test_remote_peer_without_configured_token_gets_nothing(admin):
    harness = await admin("")  # no admin.token at all
    for remote in harness.remotes:
        for token in (None, "", "null", "None", ADMIN_TOKEN):
            reply = await remote.call("GET", "/status", token=token)
            assert reply.status == 401, (remote.mode, token)
        assert (await remote.call("GET", "/healthz")).status == 200


async def test_ipv6_loopback_is_this_machine(admin):
    """A server on ::1 sees its clients as ::1, which is loopback."""
    import socket

    from aiohttp import web

    if not socket.has_ipv6:
        pytest.skip("no IPv6 on this machine")
    harness = await admin()
    site = web.TCPSite(harness.runner, "::1", 0)
    try:
        await site.start()
    except OSError as exc:
        pytest.skip(f"cannot listen on ::1: {exc}")
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    auth = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    async with harness.http.get(f"http://[::1]:{port}/status", headers=auth) as resp:
        assert resp.status == 200
    async with harness.http.get(f"http://[::1]:{port}/events/tail", headers=auth) as resp:
        assert resp.status == 200


async def test_ipv4_mapped_loopback_peer_is_this_machine(admin):
    """A dual-stack socket reports 127.0.0.1 as ::ffff:127.0.0.1; that is still this machine."""
    harness = await admin()
    for peer, expected in ((("::ffff:127.0.0.1", 40000, 0, 0), 200), (("::ffff:192.0.2.9", 40000, 0, 0), 403)):
        site = PeerSite(harness.runner, peer)
        await site.start()
        auth = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
        async with harness.http.get(f"http://127.0.0.1:{site.port}/events/tail", headers=auth) as resp:
            assert resp.status == expected, peer


@pytest.mark.parametrize(
    "address, loopback",
    [
        ("127.0.0.1", True),
        ("127.9.8.7", True),
        ("::1", True),
        ("::ffff:127.0.0.1", True),
        ("192.0.2.2", False),
        ("10.0.0.1", False),
        ("::ffff:10.0.0.1", False),
        ("fd00::2", False),
        ("0.0.0.0", False),
        ("::", False),
        ("localhost", False),
        ("", False),
        ("fe80::1%eth0", False),
    ],
)
def test_loopback_addresses(address: str, loopback: bool):
    assert is_loopback_address(address) is loopback


async def test_rebound_host_and_cross_site_pages_get_nothing_from_a_signed_in_browser(admin):
    """A page on another site, or a DNS name rebound to 127.0.0.1, must not ride on the
    dashboard's cookie, and a rebound name is not this machine for loopback-only routes."""
    harness = await admin()
    await harness.seed()
    cookies = await harness.sign_in()
    local = harness.local
    host = local.base.removeprefix("http://")
    port = host.rsplit(":", 1)[1]
    for headers in (
        {"Host": "evil.example", "Origin": "http://localhost:1"},
        {"Origin": "http://evil.example"},
        {"Origin": "null"},
        {"Origin": "http://localhost:1"},
        {"Sec-Fetch-Site": "cross-site"},
        {"Sec-Fetch-Site": "same-site"},
    ):
        signed_in = {"token": None, "cookies": cookies, "headers": headers}
        assert (await local.call("GET", "/status", **signed_in)).status == 401, headers
        assert (await local.call("POST", f"/sessions/{SEEDED}/clear", **signed_in)).status == 401, headers
        chat = await local.call("POST", "/api/chat", json_body={"text": "/whoami"}, **signed_in)
        assert chat.status == 401, f"the web chat must not treat {headers} as the owner"
    for headers in ({"Host": "evil.example"}, {"Host": f"evil.example:{port}"}):
        purge = await local.call("POST", f"/sessions/{SEEDED}/purge?confirm={SEEDED}", headers=headers)
        assert purge.status == 403, headers
    assert harness.services.transcripts.count(SEEDED) == 2  # nothing was purged
    # The dashboard's own requests: same origin, from a page on this machine.
    same_origin = {"Origin": local.base, "Sec-Fetch-Site": "same-origin"}
    clear = await local.call("POST", f"/sessions/{SEEDED}/clear", token=None, cookies=cookies, headers=same_origin)
    assert clear.status == 200
    assert (await local.call("GET", "/status", headers={"Host": f"localhost:{port}"})).status == 200
    # A remote caller with the token is fine whatever page it comes from: browsers never attach it by themselves.
    remote = harness.remotes[0]
    assert (await remote.call("GET", "/status", token=ADMIN_TOKEN, headers={"Origin": "http://x"})).status == 200
