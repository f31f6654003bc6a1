"""One FalkorDB connection and one Graphiti, used one group (one scope's graph) at a time.

Every read names exactly one group: Graphiti routes a single group id to that group's
graph, and nothing here calls the driver's `get_by_group_ids` helpers (upstream bugs
getzep/graphiti #1842, #1876 read across groups). The model client counts the tokens each
call spends (from the API's `usage`) for the ingestion budget.
"""

from __future__ import annotations

import contextvars
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from urllib.parse import urlparse

from memory.graph import load_graphiti

load_graphiti()

import httpx  # noqa: E402
from graphiti_core import Graphiti  # noqa: E402
from graphiti_core.cross_encoder.client import CrossEncoderClient  # noqa: E402
from graphiti_core.driver.falkordb_driver import FalkorDriver  # noqa: E402
from graphiti_core.edges import EntityEdge  # noqa: E402
from graphiti_core.embedder.client import EmbedderClient  # noqa: E402
from graphiti_core.llm_client.config import LLMConfig  # noqa: E402
from graphiti_core.llm_client.openai_generic_client import OpenAIGenericClient  # noqa: E402
from graphiti_core.nodes import EpisodeType  # noqa: E402
from graphiti_core.search.search import search as graphiti_search  # noqa: E402
from graphiti_core.search.search_config_recipes import EDGE_HYBRID_SEARCH_RRF  # noqa: E402
from graphiti_core.search.search_filters import SearchFilters  # noqa: E402
from openai import AsyncOpenAI  # noqa: E402

from memory.semantic.embedders import Embedder  # noqa: E402

log = logging.getLogger(__name__)

EmbedderSource = Callable[[], Awaitable[Embedder | None]]


@dataclass
class TokenMeter:
    """Tokens the model reported for the calls made while this meter was current."""

    prompt: int = 0
    completion: int = 0
    calls: int = 0

    @property
    def total(self) -> int:
        return self.prompt + self.completion


_meter: contextvars.ContextVar[TokenMeter | None] = contextvars.ContextVar("graph_token_meter", default=None)


# each model call's reported usage, for whoever keeps the accounts (halo's usage table):
# the model's name, input tokens, of them cached, output tokens
UsageSink = Callable[[str, int, int, int], Awaitable[None]]


def _usage_counter(endpoint_model: str, sink: UsageSink | None) -> Callable[[httpx.Response], Awaitable[None]]:
    """The HTTP client's response hook: counts each chat completion's usage into the current
    `TokenMeter` (the ingestion budget) and hands it to `sink`."""

    async def count(response: httpx.Response) -> None:
        meter = _meter.get()
        if (meter is None and sink is None) or not response.request.url.path.endswith("/chat/completions"):
            return
        await response.aread()
        try:
            body = response.json()
            usage = body.get("usage") or {}
        except (ValueError, AttributeError):
            return
        prompt = int(usage.get("prompt_tokens") or 0)
        completion = int(usage.get("completion_tokens") or 0)
        cached = int((usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0)
        if meter is not None:
            meter.calls += 1
            meter.prompt += prompt
            meter.completion += completion
        if sink is not None and usage:
            await sink(str(body.get("model") or endpoint_model), prompt, cached, completion)

    return count


class _CappedClient(OpenAIGenericClient):
    """Graphiti's OpenAI-compatible client with halo's output cap on every call (Graphiti asks
    16384 for edges) and no retry loop of its own: a failed episode is retried from the
    watermark later, not for minutes inside one chat's background task."""

    async def generate_response(self, messages: Any, response_model: Any = None, max_tokens: Any = None, **kw: Any):  # type: ignore[override]
        capped = min(max_tokens or self.max_tokens, self.max_tokens)
        return await super().generate_response(messages, response_model, capped, **kw)

    async def _generate_response_with_retry(self, messages: Any, response_model: Any = None, *a: Any, **kw: Any):  # type: ignore[override]
        return await self._generate_response(messages, response_model, *a, **kw)


class HaloEmbedder(EmbedderClient):
    """halo's configured embedder behind Graphiti's interface, so facts and recall share vectors."""

    def __init__(self, source: EmbedderSource) -> None:
        self.source = source

    async def _embedder(self) -> Embedder:
        embedder = await self.source()
        if embedder is None:
            raise RuntimeError("graph memory needs an embedder (memory.semantic.embedder is none or unavailable)")
        return embedder

    async def create(self, input_data: Any) -> list[float]:
        text = input_data if isinstance(input_data, str) else " ".join(map(str, input_data))
        vectors = await (await self._embedder()).embed([text])
        return vectors[0].tolist()

    async def create_batch(self, input_data_list: list[str]) -> list[list[float]]:
        vectors = await (await self._embedder()).embed(list(input_data_list))
        return [v.tolist() for v in vectors]


class _NoReranker(CrossEncoderClient):
    """halo's searches use reciprocal-rank fusion, which needs no cross-encoder; this keeps
    Graphiti from building an OpenAI reranker (and a client) it would never call."""

    async def rank(self, query: str, passages: list[str]) -> list[tuple[str, float]]:
        return [(p, 1.0 / (i + 1)) for i, p in enumerate(passages)]


@dataclass(frozen=True, slots=True)
class GraphFact:
    """One fact of one group, with when it held. `invalid_at` set: superseded (or ended)."""

    group: str
    fact: str
    source: str
    target: str
    valid_at: datetime | None
    invalid_at: datetime | None
    created_at: datetime | None = None
    uuid: str = ""

    @property
    def current(self) -> bool:
        return self.invalid_at is None

    def as_json(self) -> dict[str, Any]:
        return {
            "fact": self.fact,
            "source": self.source,
            "target": self.target,
            "validAt": _iso(self.valid_at),
            "invalidAt": _iso(self.invalid_at),
            "current": self.current,
        }


@dataclass(frozen=True, slots=True)
class GraphEntity:
    name: str
    summary: str = ""


@dataclass
class EpisodeResult:
    nodes: int
    edges: int
    tokens: TokenMeter = field(default_factory=TokenMeter)


@dataclass(frozen=True, slots=True)
class ModelEndpoint:
    """Where Graphiti's model calls go: an OpenAI-compatible API."""

    base_url: str | None
    api_key: str | None
    model: str
    max_tokens: int = 2048
    timeout_seconds: float = 60.0


class GraphStore:
    """Graphiti on one FalkorDB: add episodes to a group, search one group, list or drop one."""

    def __init__(
        self, url: str, endpoint: ModelEndpoint, embedder: EmbedderSource, on_usage: UsageSink | None = None
    ) -> None:
        parsed = urlparse(url)
        self.url = url
        self.driver = FalkorDriver(
            host=parsed.hostname or "127.0.0.1",
            port=parsed.port or 6379,
            username=parsed.username,
            password=parsed.password,
        )
        self._http = httpx.AsyncClient(
            timeout=endpoint.timeout_seconds, event_hooks={"response": [_usage_counter(endpoint.model, on_usage)]}
        )
        openai = AsyncOpenAI(
            base_url=endpoint.base_url,
            api_key=endpoint.api_key or "unused",
            max_retries=0,
            http_client=self._http,  # type: ignore[arg-type]  # graphiti pins an httpx the stubs name differently
        )
        config = LLMConfig(
            api_key=endpoint.api_key, base_url=endpoint.base_url, model=endpoint.model, small_model=endpoint.model
        )
        llm = _CappedClient(config, client=openai, max_tokens=endpoint.max_tokens)
        self.graphiti = Graphiti(
            graph_driver=self.driver, llm_client=llm, embedder=HaloEmbedder(embedder), cross_encoder=_NoReranker()
        )
        self._drivers: dict[str, FalkorDriver] = {}

    async def ping(self) -> None:
        """Raises when FalkorDB does not answer."""
        await self.driver.client.connection.ping()

    async def _group_driver(self, group: str) -> FalkorDriver:
        """The driver bound to one group's graph, made once: each new FalkorDriver schedules an
        index build of its graph, which is then awaited before the first use."""
        driver = self._drivers.get(group)
        if driver is None:
            driver = self._drivers[group] = self.driver.clone(database=group)  # type: ignore[assignment]
        assert driver is not None
        if (init := driver._init_task) is not None:
            try:
                await init
            except BaseException:
                self._drivers.pop(group, None)  # the next use clones afresh and builds the indices again
                raise
            driver._init_task = None
        return driver

    async def add_episode(
        self, group: str, name: str, body: str, when: datetime, source: str, meter: TokenMeter | None = None
    ) -> EpisodeResult:
        """One episode into `group`'s graph; the caller makes sure only one runs per group.
        `meter` counts the tokens spent, also when the episode fails part-way."""
        await self._group_driver(group)  # its indices exist before Graphiti writes
        meter = meter if meter is not None else TokenMeter()
        token = _meter.set(meter)
        try:
            result = await self.graphiti.add_episode(
                name=name,
                episode_body=body,
                source_description=source,
                reference_time=when,
                source=EpisodeType.message,
                group_id=group,
            )
        finally:
            _meter.reset(token)
        return EpisodeResult(len(result.nodes), len(result.edges), meter)

    async def search(self, group: str, query: str, limit: int = 10) -> list[GraphFact]:
        """Facts of one group related to `query`, current and superseded. No model call."""
        if not query.strip():
            return []
        config = EDGE_HYBRID_SEARCH_RRF.model_copy(update={"limit": limit})  # the recipe is shared: never mutate it
        results = await graphiti_search(
            self.graphiti.clients, query, [group], config, SearchFilters(), driver=await self._group_driver(group)
        )
        edges = results.edges
        names = await self._names(group, {u for e in edges for u in (e.source_node_uuid, e.target_node_uuid)})
        return [_fact(group, e, names) for e in edges]

    async def history(self, group: str, fact: GraphFact) -> list[GraphFact]:
        """Every fact between the same two entities as `fact` (what it replaced, what replaced it)."""
        rows = await self._query(
            group,
            "MATCH (a:Entity {name: $source})-[e:RELATES_TO]->(b:Entity {name: $target}) "
            "RETURN e.uuid, e.fact, e.valid_at, e.invalid_at, e.created_at",
            source=fact.source,
            target=fact.target,
        )
        return [
            GraphFact(group, r["e.fact"], fact.source, fact.target, _dt(r["e.valid_at"]), _dt(r["e.invalid_at"]),
                      _dt(r["e.created_at"]), r["e.uuid"])
            for r in rows
        ]  # fmt: skip

    async def contents(self, group: str, limit: int = 500) -> tuple[list[GraphEntity], list[GraphFact]]:
        """Entities and facts of one group (for the admin API), newest facts first."""
        if not await self.exists(group):
            return [], []
        nodes = await self._query(
            group, "MATCH (n:Entity) RETURN n.name, n.summary ORDER BY n.name LIMIT $limit", limit=limit
        )
        edges = await self._query(
            group,
            "MATCH (a:Entity)-[e:RELATES_TO]->(b:Entity) RETURN e.uuid, e.fact, a.name, b.name, e.valid_at, "
            "e.invalid_at, e.created_at ORDER BY e.created_at DESC LIMIT $limit",
            limit=limit,
        )
        entities = [GraphEntity(r["n.name"], r["n.summary"] or "") for r in nodes]
        facts = [
            GraphFact(group, r["e.fact"], r["a.name"], r["b.name"], _dt(r["e.valid_at"]), _dt(r["e.invalid_at"]),
                      _dt(r["e.created_at"]), r["e.uuid"])
            for r in edges
        ]  # fmt: skip
        return entities, facts

    async def exists(self, group: str) -> bool:
        return group in await self.driver.client.list_graphs()

    async def delete(self, group: str) -> bool:
        """Drop the group's whole graph. True when there was one."""
        if not await self.exists(group):
            return False
        self._drivers.pop(group, None)
        await self.driver.client.select_graph(group).delete()
        return True

    async def close(self) -> None:
        await self.graphiti.close()
        await self._http.aclose()

    async def _query(self, group: str, cypher: str, **params: Any) -> list[dict[str, Any]]:
        records, _, _ = await (await self._group_driver(group)).execute_query(cypher, **params)
        return list(records or [])

    async def _names(self, group: str, uuids: set[str]) -> dict[str, str]:
        if not uuids:
            return {}
        rows = await self._query(
            group, "MATCH (n:Entity) WHERE n.uuid IN $uuids RETURN n.uuid, n.name", uuids=list(uuids)
        )
        return {r["n.uuid"]: r["n.name"] for r in rows}


def _fact(group: str, edge: EntityEdge, names: dict[str, str]) -> GraphFact:
    return GraphFact(
        group,
        edge.fact,
        names.get(edge.source_node_uuid, "?"),
        names.get(edge.target_node_uuid, "?"),
        edge.valid_at,
        edge.invalid_at,
        edge.created_at,
        edge.uuid,
    )


def _dt(value: Any) -> datetime | None:
    if value is None or value == "":
        return None
    if isinstance(value, datetime):
        return value
    try:
        return datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        return None


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value else None


def render_facts(facts: Sequence[GraphFact], history: dict[str, list[GraphFact]] | None = None) -> list[str]:
    """One line per current fact, with the date it began and what it replaced:
    "Aarav's football: Thursdays (since 2026-10-06; was: Aarav's football: Tuesdays, 2026-09-01 – 2026-10-06)".
    A superseded fact with no current successor in `facts` gets its own "(no longer true since …)" line."""
    lines: list[str] = []
    seen: set[str] = set()
    for fact in sorted(facts, key=lambda f: not f.current):  # current first: they claim their history
        if fact.uuid in seen:
            continue
        seen.add(fact.uuid)
        older = [h for h in (history or {}).get(fact.uuid, []) if h.uuid != fact.uuid]
        if fact.current:
            since = f"since {fact.valid_at.date().isoformat()}" if fact.valid_at else "date unknown"
            was = [h for h in older if not h.current]
            seen.update(h.uuid for h in was)
            parts = [since] + [f"was: {h.fact}, {_span(h)}" for h in sorted(was, key=_start, reverse=True)]
            lines.append(f"{fact.fact} ({'; '.join(parts)})")
        else:
            lines.append(f"{fact.fact} (no longer true: {_span(fact)})")
    return lines


def _start(fact: GraphFact) -> str:
    return fact.valid_at.isoformat() if fact.valid_at else ""


def _span(fact: GraphFact) -> str:
    start = fact.valid_at.date().isoformat() if fact.valid_at else "?"
    end = fact.invalid_at.date().isoformat() if fact.invalid_at else "now"
    return f"{start} – {end}"
