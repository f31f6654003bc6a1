"""Graph memory in a turn: the recalled-facts context section, the agent's `facts` tool, `/facts`.

All three read only the graphs of scopes the policy lets this turn's speaker read from this
scope (`read_memory`) — the same rule as semantic recall (halo/recall.py), asked here in
code for every scope; GraphMemory searches whatever groups it is given.
"""

from __future__ import annotations

import asyncio
import logging

from agents import FunctionTool, RunContextWrapper

from halo.commands.builtin import Command
from halo.context.builder import ContextSection
from halo.context.recall import readable_among, scope_label
from halo.core.turn import Turn, TurnRun
from halo.routing.plan import TurnPlan
from halo.tools.guarded import guarded_tool
from memory.graph.service import GraphMemory
from transcripts import AuditLog
from transcripts.tokens import estimate_tokens

log = logging.getLogger(__name__)

TOOL_LIMIT = 10
CONTEXT_TIMEOUT_SECONDS = 3.0  # a slow graph server costs a turn its facts, never its reply
COMMAND_LIMIT = 8


class GraphRecall:
    """Graph memory in a turn, over this halo's graph (None or off: every answer says so)."""

    def __init__(self, graph: GraphMemory | None, audit: AuditLog) -> None:
        self.graph = graph
        self.audit = audit

    def _on(self) -> GraphMemory | None:
        return self.graph if self.graph is not None and self.graph.enabled else None

    def readable_graph_scopes(self, turn: Turn, *, audit: bool) -> list[str]:
        """This scope and every scope with a graph that the policy lets this turn read (the
        same rule as recall)."""
        graph = self._on()
        if graph is None:
            return []
        return readable_among(turn, graph.known_scopes(), audit=audit)

    async def facts_about(self, turn: Turn, query: str, *, limit: int, audit: bool = True) -> list[str]:
        """Rendered facts from the readable graphs: current ones with their start date and what
        they replaced, each labelled with where it was learnt."""
        graph = self._on()
        if graph is None or not query.strip():
            return []
        scopes = self.readable_graph_scopes(turn, audit=audit)
        if not scopes:
            return []
        from memory.graph import group_id
        from memory.graph.store import render_facts

        found = await graph.search(scopes, query, limit=limit)
        history = await graph.history(found)
        labels = {group_id(s): scope_label(turn, s) for s in scopes}
        lines: list[str] = []
        for group in dict.fromkeys(f.group for f in found):
            facts = [f for f in found if f.group == group]
            lines += [f"[{labels.get(group, 'memory')}] {line}" for line in render_facts(facts, history)]
        other = sorted({f.group for f in found} - {group_id(turn.scope.id)})
        if other and audit:
            self.audit.write(
                "graph_recalled", scope_id=turn.scope.id, by=turn.envelope.speaker.label, groups=other, facts=len(found)
            )
        return lines[:limit]

    def source(self) -> GraphFactsSource:
        return GraphFactsSource(self)

    def tool(self) -> FunctionTool:
        @guarded_tool()
        async def facts(ctx: RunContextWrapper[TurnRun], about: str) -> str:
            """Look up remembered facts about a person, place or plan (e.g. "Aarav's football"), with
            the date each became true and what it replaced. Only memory this conversation may read.

            Args:
                about: who or what the facts are about.
            """
            if self._on() is None:
                return "Graph memory is off."
            lines = await self.facts_about(ctx.context.turn, about, limit=TOOL_LIMIT)
            return "\n".join(lines) if lines else "No facts found."

        return facts

    def command(self) -> Command:
        return Command(
            "facts", "What I know about someone or something, and since when", self._command, usage="<about>"
        )

    async def _command(self, turn: Turn, args: str) -> str:
        """`/facts <about>`: the same lookup, answered in code."""
        graph = self.graph
        if graph is None or not graph.enabled:
            reason = graph.reason if graph is not None else "not configured"
            return f"Graph memory is off here ({reason})."
        if not args.strip():
            return "Usage: /facts <who or what> — e.g. /facts Aarav's football"
        lines = await self.facts_about(turn, args, limit=COMMAND_LIMIT)
        if not lines:
            return f"No facts found about “{args}”."
        return "\n".join([f"Facts about “{args}”:", *(f"{n}. {line}" for n, line in enumerate(lines, start=1))])


class GraphFactsSource:
    """Adds the facts related to this message, with their dates, inside a small token budget."""

    def __init__(
        self,
        recall: GraphRecall,
        title: str = "Known facts (graph memory)",
        priority: int = 6,
        budget_tokens: int = 300,
    ) -> None:
        self.recall = recall
        self.title = title
        self.priority = priority
        self.budget_tokens = budget_tokens

    async def sections(self, turn: Turn, plan: TurnPlan) -> list[ContextSection]:
        graph = self.recall._on()
        if graph is None or graph.settings.context_facts == 0 or turn.envelope.text.lstrip().startswith("/"):
            return []
        try:
            async with asyncio.timeout(CONTEXT_TIMEOUT_SECONDS):
                lines = await self.recall.facts_about(
                    turn, turn.envelope.text, limit=graph.settings.context_facts, audit=False
                )
        except Exception:  # recall helps a turn; it must never break one (nor hold it up)
            log.exception("graph recall failed for %s", turn.scope.id)
            return []
        budget = self.budget_tokens
        kept: list[str] = []
        for line in lines:
            cost = estimate_tokens(line)
            if cost <= budget:
                kept.append(f"- {line}")
                budget -= cost
        if not kept:
            return []
        intro = "Facts remembered about people and plans, with the date each became true (newest wins):"
        return [ContextSection(self.title, "\n".join([intro, *kept]), self.priority, volatile=True)]
