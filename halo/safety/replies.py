"""What halo says when a guardrail decides: supportive replies, deflections, parent alerts, shortening.

Written in code, not by the model, so they are the same with or without a provider and can
never themselves carry the risk they answer.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

from config.family import Member
from halo.safety.screen import SAFETY_CATEGORIES, Assessment, Category

CATEGORY_LABELS: dict[str, str] = {
    "self_harm": "self-harm or suicidal thoughts",
    "abuse": "possible abuse or someone hurting them",
    "danger": "possible immediate danger",
    "sexual": "sexual content",
    "strangers": "contact with a stranger",
    "personal_data": "sharing personal details (address, phone number …)",
    "other": "something worrying",
}


def label(category: Category | None) -> str:
    return CATEGORY_LABELS.get(category or "other", CATEGORY_LABELS["other"])


def _grown_ups(parents: list[Member]) -> str:
    names = [p.name for p in parents]
    if not names:
        return "a grown-up you trust"
    if len(names) == 1:
        return f"{names[0]} or another grown-up you trust"
    return f"{', '.join(names[:-1])} or {names[-1]}, or another grown-up you trust"


def supportive_reply(age_group: str, assessment: Assessment, parents: list[Member], emergency: str) -> str:
    """Calm, warm and short; suggests a parent or trusted adult, and emergency help when it is
    about safety."""
    who = _grown_ups(parents)
    if age_group == "young_child":
        text = (
            "Thank you for telling me. That sounds really important, and you did the right thing by "
            f"saying it. You don't have to deal with this on your own: please tell {who} right now. "
            "They love you and they want to help."
        )
    else:
        who = who.replace("grown-up", "adult")
        text = (
            "Thank you for telling me — that took courage, and I'm glad you said something. What you're "
            f"going through matters and you don't have to handle it alone. Please talk to {who}, "
            "or a school counsellor, today."
        )
    if assessment.category in SAFETY_CATEGORIES:
        text += f"\n\n{emergency}"
    return text


def deflection(age_group: str, parents: list[Member]) -> str:
    """For a blocked topic, or a reply that may not be sent: change the subject kindly."""
    if age_group == "young_child":
        return (
            f"That's a good question for {_grown_ups(parents)}. "
            "Shall we talk about something else — maybe animals, space, or a story?"
        )
    return (
        "That's not something I can help with here — it's a good one to talk over with "
        f"{_grown_ups(parents).replace('grown-up', 'adult')}. Anything else I can do for you?"
    )


def group_deflection(assessment: Assessment | None = None, emergency: str = "") -> str:
    """An adult's risky message in a group with children: move it somewhere private, and still
    say where help is when it is about safety."""
    text = "There are children in this chat, so let's take that to a private chat with me."
    if assessment is not None and assessment.category in SAFETY_CATEGORIES and emergency:
        text += f"\n\n{emergency}"
    return text


@dataclass(frozen=True, slots=True)
class Alert:
    """A parent's alert in two forms. `push` travels over chat apps (Telegram …) and never
    carries the child's words; `inbox` stays in halo (the parent's web inbox, policy-checked)
    and quotes the child only when that parent may read the child's transcript."""

    push: str
    inbox: str


def alert_text(
    child: Member, when: datetime, where: str, assessment: Assessment, *, words: str | None, action: str
) -> Alert:
    """`words` is given only when the policy lets this parent read the child's transcript."""
    age = (child.age_group or "child").replace("_", " ")
    head = [
        f"halo safety alert — {child.name} ({age}), {when.astimezone():%a %d %b %Y %H:%M}, {where}.",
        f"Risk: {assessment.level} — {label(assessment.category)}.",
        f"What halo did: {action}.",
    ]
    if words is None:
        private = (
            f"{child.name}'s own words are private under their visibility setting; "
            "only the category is shared. A calm, open check-in usually helps most."
        )
        return Alert("\n".join([*head, private]), "\n".join([*head, private]))
    pointer = (
        f"What {child.name} wrote is in your halo inbox (web chat, or the dashboard's Children panel); "
        "it is not sent over chat apps."
    )
    quoted = [f"Summary: {assessment.summary}"] if assessment.summary else []
    quoted.append(f'What {child.name} wrote: "{words}"')
    return Alert("\n".join([*head, pointer]), "\n".join([*head, *quoted]))


_SENTENCE_END = re.compile(r"[.!?…](?:[\"')\]]*)(?=\s|$)|\n\s*\n")


def shorten(text: str, max_chars: int) -> str:
    """Cut `text` to at most `max_chars`, on the last sentence end that keeps a fair part of it,
    else on a word boundary with an ellipsis."""
    text = text.strip()
    if len(text) <= max_chars:
        return text
    window = text[:max_chars]
    ends = [m.end() for m in _SENTENCE_END.finditer(window)]
    if ends and ends[-1] >= max_chars * 0.4:
        return window[: ends[-1]].rstrip()
    cut = window[: max_chars - 1]
    space = cut.rfind(" ")
    if space >= max_chars * 0.5:
        cut = cut[:space]
    return cut.rstrip(" ,;:-") + "…"
