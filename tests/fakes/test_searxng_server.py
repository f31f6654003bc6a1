"""The SearXNG stand-in answers as SearXNG's JSON API does, so halo's client is tested against
the real shape: results with url, title and content; 403 without format=json."""

from __future__ import annotations

import aiohttp

from tests.fakes.searxng_server import FakeSearxng


async def test_the_stand_in_speaks_searxngs_json_api() -> None:
    pages = {"museum": [{"url": "https://museum.example/visit", "title": "Visit", "content": "Open 10-17"}]}
    async with FakeSearxng(pages) as searx, aiohttp.ClientSession() as http:
        async with http.get(f"{searx.base_url}/search", params={"q": "science museum", "format": "json"}) as r:
            body = await r.json()
        assert r.status == 200 and body["query"] == "science museum" and body["number_of_results"] == 1
        assert {"url", "title", "content", "engine"} <= set(body["results"][0])
        async with http.get(f"{searx.base_url}/search", params={"q": "x"}) as r:
            assert r.status == 403  # SearXNG refuses a format it was not asked to enable
        assert searx.queries == ["science museum"]
