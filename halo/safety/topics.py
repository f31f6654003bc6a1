"""Blocked topics: keyword lists that make a profile's `blocked_topics` enforceable without a model.

A topic a family names that is not in the library (and not in `safety.topics`) is matched by
its own words, so `blocked_topics: [fortnite]` works as written.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from functools import lru_cache

from halo.safety.screen import normalise

LIBRARY: dict[str, tuple[str, ...]] = {
    "violence": (
        "murder",
        "murdered",
        "murdering",
        "gore",
        "gory",
        "bloody",
        "stabbing",
        "stabbed",
        "massacre",
        "torture",
        "tortured",
        "behead",
        "beheaded",
        "beat him up",
        "beat her up",
        "beat them up",
    ),
    "weapons": (
        "gun",
        "guns",
        "rifle",
        "pistol",
        "revolver",
        "firearm",
        "firearms",
        "bomb",
        "bombs",
        "explosive",
        "explosives",
        "grenade",
        "ammo",
        "ammunition",
        "make a weapon",
        "🔫",
        "🔪",
        "🗡",
        "⚔",
        "💣",
        "🧨",
        "🪓",
    ),
    "drugs": (
        "drugs",
        "cocaine",
        "heroin",
        "meth",
        "weed",
        "marijuana",
        "cannabis",
        "vape",
        "vaping",
        "lsd",
        "ecstasy",
        "get high",
        "getting high",
        "💊",
        "💉",
    ),
    "alcohol": (
        "alcohol",
        "beer",
        "beers",
        "wine",
        "vodka",
        "whisky",
        "whiskey",
        "rum",
        "drunk",
        "booze",
        "cocktail",
        "cocktails",
        "tequila",
        "🍺",
        "🍻",
        "🍷",
        "🥃",
        "🍸",
        "🍹",
        "🍾",
    ),
    "gambling": (
        "gambling",
        "gamble",
        "casino",
        "casinos",
        "betting",
        "poker",
        "slot machine",
        "slot machines",
        "lottery",
        "place a bet",
    ),
    "dating": ("dating", "go on a date", "going on a date", "romance", "romantic", "make out", "making out"),
    "horror": ("horror", "scary movie", "slasher", "demon", "demons", "possessed", "haunted house"),
}


@lru_cache(maxsize=256)
def _pattern(words: tuple[str, ...]) -> re.Pattern[str]:
    """Words match whole words; an emoji matches wherever it is ("🔫🔫", "a🍺")."""
    ordered = sorted({normalise(w) for w in words} - {""}, key=len, reverse=True)
    alternatives = "|".join(
        rf"\b{re.escape(w)}\b" if w[0].isalnum() and w[-1].isalnum() else re.escape(w) for w in ordered
    )
    return re.compile(f"(?:{alternatives})")


def keywords(topic: str, extra: Mapping[str, Iterable[str]] | None = None) -> tuple[str, ...]:
    """The words of `topic`: the family's own list first, then the library, else the name itself."""
    if extra and topic in extra:
        return tuple(extra[topic])
    return LIBRARY.get(topic, (topic.replace("_", " "),))


def blocked_topic(text: str, topics: Iterable[str], extra: Mapping[str, Iterable[str]] | None = None) -> str | None:
    """The first of `topics` that `text` is about, or None."""
    norm = normalise(text)
    for topic in topics:
        words = keywords(topic, extra)
        if words and _pattern(tuple(words)).search(norm):
            return topic
    return None
