"""A stand-in SearXNG (its JSON search API, `GET /search?q=…&format=json`), on 127.0.0.1.

Answers like SearXNG does: `{"query", "number_of_results", "results": [{"url", "title",
"content", "engine", …}], …}`, and 403 when a format other than JSON is asked for (SearXNG
refuses formats its settings do not enable). `pages` maps words to results; `queries` records
what was asked.
"""

from __future__ import annotations

from typing import Any, Self

from aiohttp import web

from tests.conftest import free_port


class FakeSearxng:
    def __init__(self, pages: dict[str, list[dict[str, str]]] | None = None) -> None:
        self.pages = pages or {}
        self.queries: list[str] = []
        self._runner: web.AppRunner | None = None
        self.port = free_port()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def __aenter__(self) -> Self:
        app = web.Application()
        app.router.add_get("/search", self._search)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", self.port).start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def _search(self, request: web.Request) -> web.Response:
        if request.query.get("format") != "json":
            return web.Response(status=403, text="Forbidden")
        query = request.query.get("q", "")
        self.queries.append(query)
        results: list[dict[str, Any]] = []
        for word, hits in self.pages.items():
            if word.lower() in query.lower():
                results += [{**hit, "engine": "stand-in", "engines": ["stand-in"], "score": 1.0} for hit in hits]
        body = {
            "query": query,
            "number_of_results": len(results),
            "results": results,
            "answers": [],
            "corrections": [],
            "infoboxes": [],
            "suggestions": [],
            "unresponsive_engines": [],
        }
        return web.json_response(body)
