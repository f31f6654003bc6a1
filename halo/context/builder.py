"""Context assembly: the instructions a turn's model sees, inside a token budget.

Sections come from sources (persona and speaker here; memory and recall plug in later),
are kept in priority order, and a section that does not fit is cut from its oldest part
with a visible marker, never silently.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from memory.store import SOUL, MemoryStore
from transcripts.tokens import estimate_tokens

if TYPE_CHECKING:
    from halo.core.turn import Turn
    from halo.routing.plan import TurnPlan

CUT_MARKER = "[… older part cut to fit the context budget …]"

DEFAULT_SOUL = """# SOUL

You are halo, a warm, practical assistant for one family. You speak plainly and briefly.
You keep each person's private things private: what someone tells you in a direct message
stays there unless they choose to share it. You never invent facts about family members.
When you do not know, you say so.
"""


@dataclass(frozen=True, slots=True)
class ContextSection:
    title: str
    text: str
    priority: int  # lower is more important: kept first when the budget is tight
    # changes from turn to turn (the time, recall): not in the instructions but in a note just
    # before the member's message, so instructions, tool schemas and history stay a byte-stable
    # prefix that a provider's prompt cache reuses turn after turn
    volatile: bool = False


@dataclass(frozen=True, slots=True)
class Assembled:
    """A turn's context in two parts: `instructions`, the stable sections (the system prompt),
    and `note`, the volatile ones (the time, recall), sent as a message before the member's."""

    instructions: str
    note: str


class ContextSource(Protocol):
    """Contributes sections to a turn's instructions. Must only read what the policy allows,
    and only what the turn's plan gives it (`TurnPlan.notes`, `.recall`)."""

    async def sections(self, turn: Turn, plan: TurnPlan) -> list[ContextSection]: ...


def cut_oldest(text: str, max_tokens: int) -> str:
    """Keep the newest (last) part of `text` that fits, with a marker where it was cut."""
    if estimate_tokens(text) <= max_tokens:
        return text
    keep_chars = max(0, max_tokens * 4 - len(CUT_MARKER) - 8)
    tail = text[-keep_chars:] if keep_chars else ""
    newline = tail.find("\n")
    if 0 <= newline < len(tail) // 4:
        tail = tail[newline + 1 :]  # start on a whole line
    return f"{CUT_MARKER}\n{tail}"


class PersonaSource:
    """SOUL.md and who is speaking, where."""

    def __init__(self, memory: MemoryStore) -> None:
        self.memory = memory  # SOUL.md: read each turn, so a parent's edit shows up on the next

    async def sections(self, turn: Turn, plan: TurnPlan) -> list[ContextSection]:
        env = turn.envelope
        member = env.speaker.member
        who = f"{member.name} (member id {member.id}, {member.role}" if member else "an unknown person ("
        if member and member.role == "child":
            who += f", {member.age_group}"
        who += ")"
        target = env.target_member
        about = f"\nThe request is about: {target.name}." if target and target is not member else ""
        now = env.ts.astimezone()
        situation = f"Speaking: {who}.\nWhere: {_describe_scope(turn)}.{about}"
        return [
            ContextSection("Persona", self.memory.text(SOUL) or DEFAULT_SOUL, priority=0),
            ContextSection("This conversation", situation, priority=1),
            ContextSection("Now", f"{now:%A %Y-%m-%d %H:%M %Z}.", priority=1, volatile=True),
        ]


def _describe_scope(turn: Turn) -> str:
    kinds = {
        "dm": "a private one-to-one chat",
        "parents_group": "the parents-only group chat",
        "family_group": "the whole-family group chat",
        "work_channel": "a work channel",
        "home": "home events",
    }
    return f"{kinds.get(turn.scope.type, turn.scope.type)} on {turn.envelope.platform}"


class ContextBuilder:
    """`lean_sources`: the ones a plan without recall (`TurnPlan.recall`: small talk at L1) is
    given — who is speaking where, how to talk to them and the memory — not recall or documents,
    which the rules found the message does not need. None: every source."""

    def __init__(
        self,
        sources: list[ContextSource],
        budget_tokens: int = 6000,
        *,
        lean_sources: list[ContextSource] | None = None,
    ) -> None:
        self.sources = sources
        self.lean_sources = sources if lean_sources is None else lean_sources
        self.budget = budget_tokens

    async def sections(self, turn: Turn, plan: TurnPlan) -> list[ContextSection]:
        found: list[ContextSection] = []
        for source in self.sources if plan.recall else self.lean_sources:
            found.extend(await source.sections(turn, plan))
        return sorted(found, key=lambda s: s.priority)

    async def assemble(self, turn: Turn, plan: TurnPlan) -> Assembled:
        """The sections that fit, by priority, split into the stable and the volatile ones."""
        left = self.budget
        stable: list[str] = []
        volatile: list[str] = []
        for section in await self.sections(turn, plan):
            if not section.text.strip():
                continue
            parts = volatile if section.volatile else stable
            header = f"## {section.title}\n"
            room = left - estimate_tokens(header)
            if room <= 16:
                parts.append(f"## {section.title}\n{CUT_MARKER}")
                continue
            body = cut_oldest(section.text.strip(), room)
            parts.append(header + body)
            left -= estimate_tokens(header + body)
        return Assembled("\n\n".join(stable), "\n\n".join(volatile))
