"""Model levels and the decision that picks one, recorded with every turn."""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import Literal

from halo.core.options import Option

SmallKind = Literal["thanks", "greeting", "farewell", "acknowledgement", "emoji"]


class Level(IntEnum):
    """L0: no model; L1: llm.cheap_model; L2: llm.model; L3: llm.strong_model."""

    L0 = 0
    L1 = 1
    L2 = 2
    L3 = 3

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True, slots=True)
class Route:
    """The level a message is answered at and why; `wanted` is what the message asked for
    before a cap (a young child's profile, the budget) brought it down."""

    level: Level
    reason: str
    wanted: Level | None = None
    small: SmallKind | None = None  # an L0 message that needs no model: what kind it was

    @property
    def capped(self) -> bool:
        return self.wanted is not None and self.wanted > self.level

    def marks(self) -> dict[str, str]:
        """For the transcript line and the audit event."""
        found = {"level": str(self.level), "level_reason": self.reason}
        if self.capped:
            found["level_wanted"] = str(self.wanted)
        return found


IN_CODE = Route(Level.L0, "a command or code answers")


@dataclass(frozen=True, slots=True)
class CodeAnswer:
    """A reply made in code before the router (a /command, an answerer: halo/pipeline's
    `CodeAnswers`), with the level it was made at: L0 unless the answerer used a model (a status
    answer worded by llm.model is L2), and the buttons it carries."""

    text: str
    route: Route = IN_CODE
    offered: tuple[Option, ...] = ()
