"""The fetch_page tool: public pages only, checked on every hop, and only for whom the policy
allows ("outward" tools: no young child). A real aiohttp site on 127.0.0.1 stands in for the
web; the fetcher is given a rule that lets it reach that one server and nothing else private."""

from __future__ import annotations

import ipaddress
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from config.loader import ConfigError, load_settings
from halo.tools.web import PageFetcher, Refused, public_only
from tests.conftest import FAMILY_YAML, llm_yaml, write_home
from tests.fakes.llm_server import FakeOpenAI, ToolCall
from tests.fakes.searxng_server import FakeSearxng

LETTER = """<html><head><title>Oak School: trip letter</title><script>var secret = 1;</script></head>
<body><h1>Year 4 trip</h1><p>The school trip to the science museum is on Friday 4 December.</p>
<style>p {color: red}</style></body></html>"""


@pytest.fixture
async def site() -> AsyncIterator[TestServer]:
    async def letter(request: web.Request) -> web.Response:
        return web.Response(text=LETTER, content_type="text/html")

    async def to_metadata(request: web.Request) -> web.Response:
        raise web.HTTPFound("http://169.254.169.254/latest/meta-data/")

    async def to_other_port(request: web.Request) -> web.Response:
        raise web.HTTPFound(f"http://127.0.0.1:{request.url.port + 1}/")

    async def to_letter(request: web.Request) -> web.Response:
        raise web.HTTPFound("/letter")

    async def to_broken(request: web.Request) -> web.Response:
        return web.Response(status=302, headers={"Location": "http://[::1/"})

    async def binary(request: web.Request) -> web.Response:
        return web.Response(body=b"\x00\x01", content_type="application/octet-stream")

    async def big(request: web.Request) -> web.Response:
        return web.Response(text="word " * 400_000, content_type="text/plain")

    app = web.Application()
    app.router.add_get("/letter", letter)
    app.router.add_get("/to-metadata", to_metadata)
    app.router.add_get("/to-other-port", to_other_port)
    app.router.add_get("/to-letter", to_letter)
    app.router.add_get("/to-broken", to_broken)
    app.router.add_get("/binary", binary)
    app.router.add_get("/big", big)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    yield server
    await server.close()


def only(server: TestServer) -> PageFetcher:
    """Public addresses, and this one test server: everything else private stays refused."""

    def rule(address: ipaddress.IPv4Address | ipaddress.IPv6Address, port: int) -> bool:
        return (str(address), port) == ("127.0.0.1", server.port) or address.is_global

    return PageFetcher(rule)


async def test_a_page_comes_back_as_its_text_with_its_title(site: TestServer) -> None:
    page = await only(site).fetch(f"http://127.0.0.1:{site.port}/to-letter")
    assert page.title == "Oak School: trip letter"
    assert "science museum is on Friday 4 December" in page.text
    assert "secret" not in page.text and "color" not in page.text  # no script, no style
    assert page.url.endswith("/letter") and not page.truncated


async def test_a_big_page_is_cut_and_says_so(site: TestServer) -> None:
    page = await only(site).fetch(f"http://127.0.0.1:{site.port}/big")
    assert page.truncated and len(page.text) <= 6000


@pytest.mark.parametrize(
    ("path", "why"),
    [
        ("/to-metadata", "private or local network"),  # a redirect to the cloud metadata address
        ("/to-other-port", "private or local network"),  # a redirect to another local service
        ("/binary", "not a text page"),
    ],
)
async def test_redirects_and_bodies_are_checked_on_every_hop(site: TestServer, path: str, why: str) -> None:
    with pytest.raises(Refused, match=why):
        await only(site).fetch(f"http://127.0.0.1:{site.port}{path}")


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:{port}/letter",
        "http://localhost:{port}/letter",  # a name that resolves to loopback
        "http://[::1]:{port}/letter",
        "http://10.0.0.1/",
        "http://192.168.1.1/admin",
        "http://169.254.169.254/latest/meta-data/",
        "http://[::ffff:127.0.0.1]:{port}/letter",
        "http://0.0.0.0:{port}/",
        "http://[::127.0.0.1]:{port}/letter",  # IPv4-compatible
        "http://[64:ff9b::7f00:1]:{port}/letter",  # NAT64 to 127.0.0.1
        "http://[64:ff9b::c0a8:101]/",  # NAT64 to 192.168.1.1
        "http://[2002:c0a8:101::1]/",  # 6to4 of 192.168.1.1
    ],
)
async def test_private_loopback_and_link_local_addresses_are_refused(site: TestServer, url: str) -> None:
    with pytest.raises(Refused, match="private or local network"):
        await PageFetcher().fetch(url.format(port=site.port))


@pytest.mark.parametrize(
    ("address", "allowed"),
    [
        ("8.8.8.8", True),
        ("2001:4860:4860::8888", True),
        ("::ffff:8.8.8.8", True),
        ("::8.8.8.8", True),  # IPv4-compatible, of a public address
        ("64:ff9b::808:808", True),  # NAT64 of a public address
        ("2002:808:808::1", True),  # 6to4 of a public address
        ("127.0.0.1", False),
        ("::1", False),
        ("::", False),
        ("::ffff:127.0.0.1", False),
        ("::ffff:192.168.1.1", False),
        ("::127.0.0.1", False),
        ("::192.168.1.1", False),
        ("::169.254.169.254", False),
        ("64:ff9b::7f00:1", False),
        ("64:ff9b::c0a8:101", False),
        ("64:ff9b::a9fe:a9fe", False),  # NAT64 to the cloud metadata address
        ("64:ff9b:1::c0a8:101", False),  # local-use NAT64, /96
        ("64:ff9b:1:c0a8:1:100::", False),  # local-use NAT64, /48: 192.168.1.1 around the u-octet
        ("64:ff9b:1:0:a:0:1::", False),  # local-use NAT64, /64: 10.0.0.1
        ("2002:7f00:1::1", False),  # 6to4 of 127.0.0.1
        ("2002:c0a8:101::1", False),
        ("2002:a00:1::", False),
        ("2001:0:4136:e378:8000:63bf:3fff:fdd2", False),  # Teredo
        ("2001:0:4136:e378:8000:63bf:f7f7:fffe", False),  # Teredo, client 8.8.0.1: Teredo itself is not public
        ("fe80::1", False),
        ("fc00::1", False),
        ("ff02::1", False),
    ],
)
def test_the_address_rule_judges_the_ipv4_inside_an_ipv6_address(address: str, allowed: bool) -> None:
    assert public_only(ipaddress.ip_address(address), 80) is allowed


MALFORMED = [
    "http://[::1/",
    "http://[::1]]/",
    "http://[::1]x/",
    "http://[127.0.0.1]/",
    "http://[zz::1]/",
    "http://[v1.fe]/",
    "http://[]/",
    "http://[::1%25eth0]/",
    "http://:80/",
    "http://user@/",
    "http://host:port/",
    "http://host:99999/",
    "http://host:-1/",
    "http://a:80:80/",
    "http://exa mple.com/",
    "http://a..b/",
    "http://-a.example/",
    "http://" + "a" * 64 + ".example/",
    "http://" + "a." * 127 + "example/",
    "http://\x00/",
    "http://host\x00.example/",
    "http://%zz/",
    "http://ex%61mple.com/",
    "http://\ud800/",
    "https://xn--/",
    "http://127.0.0.1\\@example.org/",
    "",
    "   ",
    "http:",
    "http://",
    "//example.org/",
    "example.org",
    "\x00",
    "http://[" + ":" * 5000 + "]/",
]


@pytest.mark.parametrize("url", MALFORMED)
async def test_a_malformed_address_is_refused_with_a_reason_and_raises_nothing_else(url: str) -> None:
    with pytest.raises(Refused) as refused:
        await PageFetcher().fetch(url)
    assert str(refused.value)


async def test_a_malformed_redirect_is_refused(site: TestServer) -> None:
    with pytest.raises(Refused, match="malformed"):
        await only(site).fetch(f"http://127.0.0.1:{site.port}/to-broken")


@pytest.mark.parametrize("url", ["file:///etc/passwd", "ftp://example.org/", "gopher://x/", "http:///nohost"])
async def test_only_http_and_https_are_fetched(url: str) -> None:
    with pytest.raises(Refused, match="only http and https"):
        await PageFetcher().fetch(url)


FAMILY_WITH_TARA_ON_WEB = FAMILY_YAML.replace(
    "{id: tara,  name: Tara,  role: child, age_group: young_child, telegram_user_id: 1004}",
    "{id: tara,  name: Tara,  role: child, age_group: young_child, telegram_user_id: 1004, web_token: tara-token}",
)


async def test_the_policy_decides_who_may_fetch_and_the_address_check_holds_inside_a_turn(
    home: Path, fake_llm: FakeOpenAI, site: TestServer, serve_halo
) -> None:
    assert "tara-token" in FAMILY_WITH_TARA_ON_WEB
    write_home(home, llm_yaml(fake_llm), family=FAMILY_WITH_TARA_ON_WEB)
    running = await serve_halo(load_settings(home))
    local = f"http://127.0.0.1:{site.port}/letter"

    fake_llm.tool_calls(ToolCall("fetch_page", {"url": local}))
    fake_llm.reply("I could not read that page.")
    status, body = await running.chat(f"What does {local} say?", token="mom-token")
    assert status == 200 and body["reply"] == "I could not read that page."
    offered = [t["function"]["name"] for t in fake_llm.model_requests[0].json.get("tools", [])]
    assert "fetch_page" in offered  # a parent may reach the web...
    tool_output = fake_llm.prompt_text(fake_llm.model_requests[1])
    assert "private or local network" in tool_output and "science museum" not in tool_output  # ...not the LAN

    fake_llm.reply("Let's ask a grown-up.")
    before = len(fake_llm.model_requests)
    status, body = await running.chat("read this page for me", token="tara-token")
    assert (status, body["reply"]) == (200, "Let's ask a grown-up.")
    [asked] = [r for r in fake_llm.model_requests[before:] if not r.intercepted]
    offered = [t["function"]["name"] for t in asked.json.get("tools", [])]
    assert offered and "fetch_page" not in offered  # a young child is not offered an outward tool


async def test_web_search_goes_through_the_familys_searxng_and_only_for_whom_the_policy_allows(
    home: Path, fake_llm: FakeOpenAI, serve_halo
) -> None:
    trip = [{"url": "https://museum.example/school-trips", "title": "School trips", "content": "Groups 9:30-15:00"}]
    async with FakeSearxng({"museum": trip}) as searx:
        write_home(
            home, llm_yaml(fake_llm) + f"tools:\n  search_url: {searx.base_url}\n", family=FAMILY_WITH_TARA_ON_WEB
        )
        running = await serve_halo(load_settings(home))

        fake_llm.tool_call("web_search", {"query": "science museum school trips"})
        fake_llm.reply("Groups visit from 9:30.")
        status, body = await running.chat("When do school groups visit the science museum?", token="mom-token")
        assert (status, body["reply"]) == (200, "Groups visit from 9:30.")
        assert searx.queries == ["science museum school trips"]
        assert "https://museum.example/school-trips" in fake_llm.prompt_text(fake_llm.model_requests[-1])

        fake_llm.reply("Let's ask a grown-up.")
        before = len(fake_llm.model_requests)
        await running.chat("search the web for me", token="tara-token")
        [asked] = [r for r in fake_llm.model_requests[before:] if not r.intercepted]
        offered = [t["function"]["name"] for t in asked.json.get("tools", [])]
        assert offered and "web_search" not in offered  # a young child: no outward tools
        assert searx.queries == ["science museum school trips"]


async def test_without_a_search_service_no_search_tool_is_offered(
    fake_llm: FakeOpenAI, settings_for, serve_halo
) -> None:
    running = await serve_halo(settings_for(llm_yaml(fake_llm)))
    fake_llm.reply("ok")
    await running.chat("hello", token="mom-token")
    offered = [t["function"]["name"] for t in fake_llm.model_requests[-1].json.get("tools", [])]
    assert "fetch_page" in offered and "web_search" not in offered


async def test_with_the_openai_provider_its_hosted_web_search_is_offered_to_whom_the_policy_allows(
    home: Path, fake_llm: FakeOpenAI, serve_halo
) -> None:
    yaml = llm_yaml(fake_llm).replace("provider: openai-compatible", "provider: openai")  # the Responses API
    write_home(home, yaml, family=FAMILY_WITH_TARA_ON_WEB)
    running = await serve_halo(load_settings(home))

    fake_llm.reply("Groups visit from 9:30.")
    await running.chat("When do school groups visit the science museum?", token="mom-token")
    fake_llm.reply("Let's ask a grown-up.")
    await running.chat("search the web for me", token="tara-token")

    mom_asked, tara_asked = [r for r in fake_llm.model_requests if not r.intercepted and r.path == "/v1/responses"]
    assert {"type": "web_search"}.items() <= _hosted(mom_asked).items()  # OpenAI runs it; the policy offers it
    assert _hosted(tara_asked) == {}  # a young child: no outward tools, hosted ones included


def _hosted(request) -> dict:
    return next((t for t in request.json.get("tools", []) if t.get("type", "").startswith("web_search")), {})


def test_a_search_url_that_is_not_http_stops_start_up_and_says_which_key(home: Path) -> None:
    write_home(home, "tools:\n  search_url: searx.local\n")
    with pytest.raises(ConfigError, match="search_url"):
        load_settings(home)


async def test_whoami_lists_the_tools_the_policy_gives_each_person(
    home: Path, fake_llm: FakeOpenAI, serve_halo
) -> None:
    write_home(home, llm_yaml(fake_llm), family=FAMILY_WITH_TARA_ON_WEB)
    running = await serve_halo(load_settings(home))

    _, mom = await running.chat("/whoami", token="mom-token")
    _, tara = await running.chat("/whoami", token="tara-token")

    [mom_tools] = [line for line in mom["reply"].splitlines() if line.startswith("Tools I may use")]
    assert "fetch_page" in mom_tools and "recall" in mom_tools
    assert "fetch_page" not in tara["reply"] and "Tools" not in tara["reply"]  # a young child's is in plain words
    assert fake_llm.model_requests == []  # answered in code
