"""Who may call what, for every route: this machine, a remote peer with and without the token,
and a remote peer pretending to be local with forwarded-for headers.

Remote peers are made at the socket (see peers.py), never with a header.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

import pytest

from admin_api.routes import admin_routes
from halo.access import is_loopback_address
from tests.admin.conftest import ADMIN_TOKEN, SEEDED, AdminHarness
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


EXAMPLES: dict[tuple[str, str], Example] = {
    ("GET", "/healthz"): Example("/healthz"),
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
    ("GET", "/pairing/requests"): Example("/pairing/requests"),
    ("GET", "/tasks"): Example("/tasks"),
    ("POST", "/pairing/requests/{code}/approve"): Example(
        "/pairing/requests/{code}/approve", json_body={"role": "child", "name": "Meera", "ageGroup": "adolescent"}
    ),
    ("POST", "/pairing/requests/{code}/deny"): Example("/pairing/requests/{code}/deny"),
    ("GET", "/"): Example("/", headers={"Accept": "text/html"}),
    ("GET", "/openapi.json"): Example("/openapi.json"),
    ("GET", "/family/transcripts"): Example("/family/transcripts"),
    ("GET", "/family/transcript"): Example("/family/transcript?scopeId=web:tara&lines=5"),
    ("GET", "/family/notifications"): Example("/family/notifications"),
}
ROUTES = {(r.method, r.path): r for r in admin_routes()}


def test_every_route_has_an_example():
    assert set(EXAMPLES) == set(ROUTES)


async def ready(admin: Any) -> AdminHarness:
    harness = await admin()
    await harness.seed()
    return harness


@pytest.mark.parametrize("key", sorted(ROUTES), ids=lambda k: f"{k[0]} {k[1]}")
async def test_route_access(key: tuple[str, str], admin):
    method, _ = key
    access = ROUTES[key].access
    example = EXAMPLES[key]
    harness = await ready(admin)
    if access == "member":
        await member_route_access(harness, method, example)
        return
    denied = {"anyone": None, "token": 401, "loopback": 403}[access]
    newcomers = itertools.count(5550001)

    async def call(endpoint, **kwargs):
        path = example.path
        if "{code}" in path:  # a success decides the request: then a new stranger asks
            pending = await harness.services.pairing.list_pending()
            path = path.replace("{code}", pending[0].code if pending else await harness.stranger(next(newcomers)))
        return await endpoint.call(
            method,
            path,
            json_body=example.json_body,
            headers={**example.headers, **kwargs.pop("headers", {})},
            **kwargs,
        )

    def decisions() -> int:
        return sum(len(harness.services.audit.tail(100, kind=k)) for k in ("pairing_approved", "pairing_denied"))

    for remote in harness.remotes:
        decided = decisions()
        for case, kwargs in {
            "no token": {},
            "wrong token": {"token": "not-the-token"},
            "the token's first characters": {"token": ADMIN_TOKEN[:-1]},
            "the token twice": {"token": ADMIN_TOKEN * 2},
            "a member's web token": {"token": "mom-token"},
            "forwarded-for headers": {"headers": FORGED},
        }.items():
            reply = await call(remote, **kwargs)
            expected = denied or 200
            assert reply.status == expected, f"{remote.mode} peer, {case}: {reply.status} {reply.text[:200]}"
            if denied and key == ("GET", "/"):  # a browser gets the sign-in page, with no data in it
                assert "Sign in" in reply.text and "mom" not in reply.text.lower()
            elif denied:
                assert set(reply.body) == {"error"}, f"{remote.mode}, {case}: errors are JSON"
        if denied:
            assert decisions() == decided, "a refused caller decided a join request"
        with_token = await call(remote, token=ADMIN_TOKEN, headers=FORGED)
        assert with_token.status == (403 if access == "loopback" else 200), f"{remote.mode} with token"
        if access == "loopback":
            assert "loopback" in with_token.body["error"]

    local = await call(harness.local)
    assert local.status == 200, local.text[:300]


async def member_route_access(harness: AdminHarness, method: str, example: Example) -> None:
    """A member route answers a member's own web_token (the policy then decides what they see);
    nothing else from a remote peer — not the admin token, not a forged header."""
    for remote in harness.remotes:
        for case, kwargs in {
            "no token": {},
            "wrong token": {"token": "not-the-token"},
            "a web token's first characters": {"token": "mom-toke"},
            "the admin token": {"token": ADMIN_TOKEN},
            "forwarded-for headers": {"headers": FORGED},
        }.items():
            reply = await remote.call(method, example.path, **kwargs)
            assert reply.status == 401, f"{remote.mode} peer, {case}: {reply.status} {reply.text[:200]}"
            assert set(reply.body) == {"error"}
        member = await remote.call(method, example.path, token="mom-token", headers=FORGED)
        assert member.status == 200, f"{remote.mode} peer as mom: {member.text[:200]}"
    local = await harness.local.call(method, example.path)  # this machine: the local owner
    assert local.status == 200, local.text[:300]


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
    async with harness.http.get(f"http://[::1]:{port}/status") as resp:
        assert resp.status == 200
    async with harness.http.get(f"http://[::1]:{port}/events/tail") as resp:
        assert resp.status == 200


async def test_ipv4_mapped_loopback_peer_is_this_machine(admin):
    """A dual-stack socket reports 127.0.0.1 as ::ffff:127.0.0.1; that is still this machine."""
    harness = await admin()
    for peer, expected in ((("::ffff:127.0.0.1", 40000, 0, 0), 200), (("::ffff:192.0.2.9", 40000, 0, 0), 403)):
        site = PeerSite(harness.runner, peer)
        await site.start()
        async with harness.http.get(f"http://127.0.0.1:{site.port}/events/tail") as resp:
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


async def test_rebound_host_and_cross_site_pages_are_not_this_machine(admin):
    """A page on another site, or a DNS name rebound to 127.0.0.1, must not borrow local trust."""
    harness = await admin()
    await harness.seed()
    local = harness.local
    host = local.base.removeprefix("http://")
    for headers in (
        {"Host": "evil.example"},
        {"Host": f"evil.example:{host.rsplit(':', 1)[1]}"},
        {"Origin": "http://evil.example"},
        {"Origin": "null"},
        {"Origin": "http://localhost:1"},
        {"Sec-Fetch-Site": "cross-site"},
        {"Sec-Fetch-Site": "same-site"},
    ):
        assert (await local.call("GET", "/status", headers=headers)).status == 401, headers
        clear = await local.call("POST", f"/sessions/{SEEDED}/clear", headers=headers)
        assert clear.status == 401, headers
        purge = await local.call("POST", f"/sessions/{SEEDED}/purge?confirm={SEEDED}", headers=headers)
        assert purge.status == 403, headers
        chat = await local.call("POST", "/api/chat", headers=headers, json_body={"text": "/whoami"})
        assert chat.status == 401, f"the web chat must not treat {headers} as the local owner"
    assert harness.services.transcripts.count(SEEDED) == 2  # nothing was purged
    # The dashboard's own requests: same origin, from a page on this machine.
    same_origin = {"Origin": local.base, "Sec-Fetch-Site": "same-origin"}
    assert (await local.call("POST", f"/sessions/{SEEDED}/clear", headers=same_origin)).status == 200
    assert (await local.call("GET", "/status", headers={"Host": f"localhost:{host.rsplit(':', 1)[1]}"})).status == 200
    # A remote caller with the token is fine whatever page it comes from: browsers never attach it by themselves.
    remote = harness.remotes[0]
    assert (await remote.call("GET", "/status", token=ADMIN_TOKEN, headers={"Origin": "http://x"})).status == 200
