"""Fetch a web page for the model: an "outward" tool, so the policy decides who gets it (no
young child does; see policy/family.cedar), and the tool asks again when it is called.

A page on the family's own network must stay out of reach, whatever the model is talked into:
only http(s); the host is resolved first and every address it resolves to must be a public
one; the connection then goes to exactly the addresses that were checked (no second DNS
lookup that could answer differently), and each redirect is checked the same way. The body is
read up to a cap, within a time limit, and only text comes back.
"""

from __future__ import annotations

import asyncio
import ipaddress
import re
import socket
from collections.abc import Callable
from dataclasses import dataclass
from html.parser import HTMLParser
from typing import Any

import aiohttp
from agents import FunctionTool, RunContextWrapper, Tool, WebSearchTool
from aiohttp.abc import AbstractResolver, ResolveResult
from yarl import URL

from halo.core.turn import TurnRun
from halo.tools.guarded import CLASS_ATTRIBUTE, guarded_tool

MAX_BYTES = 1_000_000
MAX_CHARS = 6_000  # what the model is given of a page
MAX_REDIRECTS = 5
TIMEOUT_SECONDS = 10.0
TEXT_TYPES = ("text/html", "text/plain", "application/xhtml+xml")

# Whether a connection to this address and port may be made; the default allows public
# addresses only. Tests pass a rule that also allows their own server on 127.0.0.1.
AddressRule = Callable[[ipaddress.IPv4Address | ipaddress.IPv6Address, int], bool]


_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")  # RFC 6052, well-known prefix
_NAT64_LOCAL = ipaddress.IPv6Network("64:ff9b:1::/48")  # RFC 8215, local use, any RFC 6052 length
_IPV4_COMPATIBLE = ipaddress.IPv6Network("::/96")  # deprecated ::a.b.c.d
# Where RFC 6052 puts the IPv4 bytes for each prefix length a /48 can hold (byte 8 is zero)
_RFC6052_BYTES = ((6, 7, 9, 10), (7, 9, 10, 11), (9, 10, 11, 12), (12, 13, 14, 15))


def embedded_ipv4(address: ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
    """The IPv4 addresses an IPv6 address carries and may reach through a translator or tunnel:
    IPv4-mapped and -compatible, NAT64, 6to4 and Teredo (its client)."""
    packed = address.packed
    found: list[ipaddress.IPv4Address] = []
    if address.ipv4_mapped is not None:
        found.append(address.ipv4_mapped)
    if address in _IPV4_COMPATIBLE or address in _NAT64:
        found.append(ipaddress.IPv4Address(packed[12:]))
    if address in _NAT64_LOCAL:  # the operator's prefix length is unknown: every placement
        found.extend(ipaddress.IPv4Address(bytes(packed[i] for i in at)) for at in _RFC6052_BYTES)
    if address.sixtofour is not None:
        found.append(address.sixtofour)
    if address.teredo is not None:
        found.extend(address.teredo)
    return found


def _public(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    return address.is_global and not address.is_multicast


def public_only(address: ipaddress.IPv4Address | ipaddress.IPv6Address, port: int) -> bool:
    """A public address, and for IPv6 also every IPv4 address embedded in it, judged as IPv4."""
    if isinstance(address, ipaddress.IPv4Address):
        return _public(address)
    embedded = embedded_ipv4(address)
    if address.ipv4_mapped is not None:  # it *is* the IPv4 address; Python's IPv6 verdict varies
        return all(_public(v4) for v4 in embedded)
    return _public(address) and all(_public(v4) for v4 in embedded)


class Refused(Exception):
    """The page may not be fetched; the message says why, in words for the model."""


@dataclass(frozen=True, slots=True)
class Page:
    url: str
    title: str
    text: str
    truncated: bool


class _Pinned(AbstractResolver):
    """Answers for one host with the addresses already checked, and for nothing else."""

    def __init__(self, host: str, addresses: list[str]) -> None:
        self.host = host
        self.addresses = addresses

    async def resolve(self, host: str, port: int = 0, family: int = socket.AF_INET) -> list[ResolveResult]:
        if host != self.host:
            raise OSError(f"unexpected host {host!r}")
        return [
            ResolveResult(
                hostname=host,
                host=address,
                port=port,
                family=socket.AF_INET6 if ":" in address else socket.AF_INET,
                proto=0,
                flags=socket.AI_NUMERICHOST,
            )
            for address in self.addresses
        ]

    async def close(self) -> None:
        return None


class PageFetcher:
    def __init__(self, allowed: AddressRule = public_only, *, timeout: float = TIMEOUT_SECONDS) -> None:
        self.allowed = allowed
        self.timeout = timeout

    async def fetch(self, url: str) -> Page:
        target = _parsed(url)
        async with asyncio.timeout(self.timeout):
            for _ in range(MAX_REDIRECTS + 1):
                host, addresses = await self._checked(target)
                connector = aiohttp.TCPConnector(resolver=_Pinned(host, addresses), use_dns_cache=False)
                async with (
                    aiohttp.ClientSession(connector=connector) as http,
                    http.get(target, allow_redirects=False, headers={"User-Agent": "halo (family assistant)"}) as resp,
                ):
                    if resp.status in (301, 302, 303, 307, 308) and "Location" in resp.headers:
                        target = _parsed(resp.headers["Location"], base=target)
                        continue
                    if resp.status >= 400:
                        raise Refused(f"the site answered {resp.status}")
                    kind = resp.headers.get("Content-Type", "").split(";")[0].strip().lower()
                    if kind not in TEXT_TYPES:
                        raise Refused(f"that is not a text page ({kind or 'no content type'})")
                    body = await resp.content.read(MAX_BYTES + 1)
                    text = body[:MAX_BYTES].decode(resp.charset or "utf-8", errors="replace")
                    title, words = _html_text(text) if "html" in kind else ("", text)
                    words = " ".join(words.split())
                    cut = len(body) > MAX_BYTES or len(words) > MAX_CHARS
                    return Page(str(target), title, words[:MAX_CHARS], cut)
            raise Refused(f"more than {MAX_REDIRECTS} redirects")

    async def _checked(self, url: URL) -> tuple[str, list[str]]:
        """The host as aiohttp will look it up, and its addresses, every one of them allowed."""
        host, port = url.raw_host or "", url.port or 0
        try:
            found = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except (OSError, UnicodeError):
            raise Refused(f"{host} could not be found") from None
        addresses = sorted({str(info[4][0]) for info in found})
        for address in addresses:
            if not self.allowed(ipaddress.ip_address(address.split("%", 1)[0]), port):
                raise Refused(f"{host} is on a private or local network, which I may not reach")
        return host, addresses


_AUTHORITY = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://([^/?#]*)")
_HOST_NAME = re.compile(r"(?!-)[a-z0-9_-]{1,63}(?<!-)(\.(?!-)[a-z0-9_-]{1,63}(?<!-))*\.?")


def _parsed(url: str, base: URL | None = None) -> URL:
    """The one parse of an address (yarl's, the one aiohttp connects with), or why not: a
    malformed address is refused with a reason, never an exception of another kind."""
    try:
        parsed = URL(url.strip())
        if base is not None:
            parsed = base.join(parsed)
        scheme, host, port = parsed.scheme, parsed.raw_host, parsed.port
    except (ValueError, TypeError) as exc:  # UnicodeError is a ValueError
        raise Refused(f"the address is malformed ({_reason(exc)})") from None
    if scheme not in ("http", "https") or not host:
        raise Refused("only http and https addresses can be fetched")
    written = _AUTHORITY.match(url.strip())
    if ":" in host or (written and "[" in written[1]):  # yarl unwraps "[v1.fe]" to a host name
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            raise Refused("the address is malformed (not an IPv6 address in the brackets)") from None
        if "%" in host:
            raise Refused("the address is malformed (an IPv6 zone names a local link)")
    elif len(host) > 253 or not _HOST_NAME.fullmatch(host):
        raise Refused("the address is malformed (not a host name)")
    if not port:
        raise Refused("the address has a bad port")
    return parsed


def _reason(exc: Exception) -> str:
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return text[:100]


class _Text(HTMLParser):
    SKIP = frozenset({"script", "style", "noscript", "template", "svg"})

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.title: list[str] = []
        self._skipping = 0
        self._in_title = False

    def handle_starttag(self, tag: str, attrs: Any) -> None:
        if tag in self.SKIP:
            self._skipping += 1
        self._in_title = tag == "title"

    def handle_endtag(self, tag: str) -> None:
        if tag in self.SKIP and self._skipping:
            self._skipping -= 1
        if tag == "title":
            self._in_title = False

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.title.append(data)
        elif not self._skipping:
            self.parts.append(data)


def _html_text(html: str) -> tuple[str, str]:
    parser = _Text()
    parser.feed(html)
    parser.close()
    return " ".join("".join(parser.title).split()), " ".join(parser.parts)


def web_tools(fetcher: PageFetcher) -> list[FunctionTool]:
    @guarded_tool("outward")
    async def fetch_page(ctx: RunContextWrapper[TurnRun], url: str) -> str:
        """Read a public web page (http or https) and return its text, to answer from it.

        Args:
            url: the page's full address.
        """
        try:
            page = await fetcher.fetch(url)
        except Refused as exc:
            return f"Could not fetch {url}: {exc}."
        except (TimeoutError, aiohttp.ClientError, UnicodeError) as exc:
            return f"Could not fetch {url}: {type(exc).__name__}."
        more = " (cut short)" if page.truncated else ""
        return f"{page.title}\n{page.url}{more}\n\n{page.text}".strip()

    return [fetch_page]


class WebSearch:
    """Searches through the family's SearXNG (`tools.search_url`, its JSON API). The address is
    the family's own configuration, so it may be on their network; what comes back is text."""

    def __init__(self, base_url: str, results: int = 5, *, timeout: float = TIMEOUT_SECONDS) -> None:
        self.base_url = base_url.rstrip("/")
        self.results = results
        self.timeout = timeout

    async def search(self, query: str) -> list[dict[str, str]]:
        params = {"q": query, "format": "json"}
        timeout = aiohttp.ClientTimeout(total=self.timeout)
        async with (
            aiohttp.ClientSession(timeout=timeout) as http,
            http.get(f"{self.base_url}/search", params=params) as resp,
        ):
            if resp.status != 200:
                raise Refused(f"the search service answered {resp.status}")
            data = await resp.json(content_type=None)
        found = data.get("results") if isinstance(data, dict) else None
        if not isinstance(found, list):
            raise Refused("the search service sent no results list")
        hits = []
        for item in found:
            if isinstance(item, dict) and isinstance(item.get("url"), str):
                hits.append(
                    {
                        "title": str(item.get("title") or "")[:200],
                        "url": item["url"][:500],
                        "content": " ".join(str(item.get("content") or "").split())[:400],
                    }
                )
            if len(hits) == self.results:
                break
        return hits


def search_tools(search: WebSearch) -> list[Tool]:
    @guarded_tool("outward")
    async def web_search(ctx: RunContextWrapper[TurnRun], query: str) -> str:
        """Search the web; returns the best results with their addresses (read one with fetch_page).

        Args:
            query: what to look for.
        """
        try:
            hits = await search.search(query)
        except Refused as exc:
            return f"Search failed: {exc}."
        except (TimeoutError, aiohttp.ClientError, ValueError) as exc:
            return f"Search failed: {type(exc).__name__}."
        if not hits:
            return "No results."
        return "\n\n".join(f"{n}. {h['title']}\n{h['url']}\n{h['content']}" for n, h in enumerate(hits, 1))

    return [web_search]


def hosted_search_tools() -> list[Tool]:
    """OpenAI's hosted web search, for the `openai` provider (the Responses API). It runs at
    OpenAI, so no code of ours sits in the call: the policy decides whether it is *offered*
    (as an outward tool), and a model cannot call a tool it was not offered."""
    search = WebSearchTool()
    setattr(search, CLASS_ATTRIBUTE, "outward")
    return [search]
