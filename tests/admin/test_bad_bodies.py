"""Finding 4 of issue 15: a malformed body or parameter is the client's 400 (or 415), never a 500,
on every route that takes JSON, and nothing is kept from it."""

from __future__ import annotations

import pytest

from tests.admin.conftest import ADMIN_TOKEN, SEEDED, AdminHarness

DEEP = b"[" * 50_000
HUGE_INT = b'{"text": ' + b"1" * 100_000 + b', "role": "child", "name": "X"}'
NOT_GZIP = b'{"text": "hi", "role": "child", "name": "X"}'


async def _post(harness: AdminHarness, path: str, body: bytes, headers: dict[str, str]) -> tuple[int, dict]:
    sent = {"Authorization": f"Bearer {ADMIN_TOKEN}", **headers}
    async with harness.http.post(harness.local.base + path, data=body, headers=sent) as resp:
        return resp.status, await resp.json(content_type=None)


def json_routes(code: str) -> dict[str, str]:
    return {"chat": "/api/chat", "approve": f"/pairing/requests/{code}/approve"}


@pytest.mark.parametrize(
    "case, body, headers, expected",
    [
        ("50,000 nested [", DEEP, {"Content-Type": "application/json"}, 400),
        ("a 100,000-digit integer", HUGE_INT, {"Content-Type": "application/json"}, 400),
        # a compressed body is refused unread, never inflated (issue 22, finding 3)
        ("gzip that is not", NOT_GZIP, {"Content-Type": "application/json", "Content-Encoding": "gzip"}, 415),
        ("deflate that is not", NOT_GZIP, {"Content-Type": "application/json", "Content-Encoding": "deflate"}, 415),
        ("text/plain", NOT_GZIP, {"Content-Type": "text/plain"}, 415),
        ("no content type", NOT_GZIP, {"Content-Type": ""}, 415),
        ("not UTF-8", b'{"text": "\xff\xfe"}', {"Content-Type": "application/json"}, 400),
    ],
)
async def test_a_bad_body_is_a_clear_4xx(admin, case: str, body: bytes, headers: dict[str, str], expected: int):
    harness = await admin()
    code = await harness.stranger()
    for name, path in json_routes(code).items():
        if name == "chat":
            headers = {**headers, "Authorization": "Bearer wags-token"}
        status, answer = await _post(harness, path, body, headers)
        assert status == expected, f"{name}, {case}: {status} {answer}"
        assert set(answer) == {"error"} and answer["error"], f"{name}, {case}: {answer}"
    assert [r.code for r in await harness.services.pairing.list_pending()] == [code]  # nothing decided
    assert harness.services.transcripts.count("web:wags") == 0  # nothing kept


@pytest.mark.parametrize("lines", [" 5", "5 ", "٥", "５", "+5", "5.0", "0x5", "1_0", ""])
async def test_lines_is_plain_ascii_digits(admin, lines: str):
    harness = await admin()
    await harness.seed()
    for path in ("/events/tail", f"/transcripts/tail?scopeId={SEEDED}", f"/events?scopeId={SEEDED}"):
        url = harness.local.base + path
        params = {"lines": lines}
        async with harness.http.get(url, params=params, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}) as resp:
            assert resp.status == 400, (path, lines, await resp.text())


async def test_a_good_body_still_works(admin):
    harness = await admin()
    code = await harness.stranger()
    status, answer = await _post(
        harness,
        f"/pairing/requests/{code}/approve",
        b'{"role": "child", "name": "Meera", "ageGroup": "adolescent"}',
        {"Content-Type": "application/json; charset=utf-8"},
    )
    assert status == 200, answer
