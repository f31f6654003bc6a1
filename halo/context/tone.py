"""The tone section of a guarded turn's instructions: how to talk with this age group.

Prompt text only shapes the wording; every limit it mentions is also enforced in code.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from halo.context.builder import ContextSection
from halo.safety.gate import verdict

if TYPE_CHECKING:
    from halo.core.turn import Turn
    from halo.routing.plan import TurnPlan


class ProfileSource:
    """Adds the age profile's tone and reply length to a child's (or the family group's) turn."""

    async def sections(self, turn: Turn, plan: TurnPlan) -> list[ContextSection]:
        state = verdict(turn)
        if state is None:
            return []
        profile = state.limits.profile
        text = profile.tone
        if state.limits.group:
            text = f"Children are in this chat, so every reply must suit them. {text}"
        text += f"\nKeep every reply under {profile.max_reply_chars} characters."
        if profile.blocked_topics:
            text += f"\nDo not discuss: {', '.join(profile.blocked_topics)}."
        return [ContextSection("How to talk here", text, priority=1)]
