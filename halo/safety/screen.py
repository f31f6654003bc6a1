"""The deterministic risk floor: patterns that work with no model, on every child turn.

It is a floor, not a ceiling: a model classification can only raise the level it finds
(`stricter`). Patterns favour catching a child in trouble over avoiding a false alarm;
a false medium costs a parent a glance, a missed high costs far more.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Literal

RiskLevel = Literal["low", "medium", "high"]
Category = Literal["self_harm", "abuse", "danger", "sexual", "strangers", "personal_data", "other"]
Source = Literal["floor", "classifier"]

LEVELS: dict[RiskLevel, int] = {"low": 0, "medium": 1, "high": 2}
CATEGORIES: tuple[Category, ...] = ("self_harm", "abuse", "danger", "sexual", "strangers", "personal_data", "other")
SAFETY_CATEGORIES: frozenset[Category] = frozenset({"self_harm", "abuse", "danger", "strangers"})


@dataclass(frozen=True, slots=True)
class Assessment:
    """The risk of one text. `topic` is a blocked topic of the profile it touches, if any.
    `summary` is a neutral sentence from the classifier; it may paraphrase the text, so it is
    shown to parents only when they may read the child's words anyway."""

    level: RiskLevel = "low"
    category: Category | None = None
    topic: str | None = None
    source: Source = "floor"
    summary: str = ""

    @property
    def above_low(self) -> bool:
        return self.level != "low"


LOW = Assessment()


def stricter(a: Assessment, b: Assessment) -> Assessment:
    """The higher risk of the two; a blocked topic found by either is kept."""
    first, second = (b, a) if LEVELS[b.level] > LEVELS[a.level] else (a, b)
    return replace(first, topic=first.topic or second.topic, summary=first.summary or second.summary)


def _rx(*patterns: str) -> re.Pattern[str]:
    return re.compile("|".join(f"(?:{p})" for p in patterns))


# Adults (and anyone unnamed) hurting a child is high risk; a sibling or classmate hitting
# them is worth a parent's attention (medium) but not an alarm.
_PEER = (
    r"(?:(?:my )?(?:little |big |older |younger |baby |best )?(?:brother|sister|cousin|friend)|"
    r"a boy|a girl|a kid|kids|classmates?|someone|somebody)"
)
_WHO = (
    rf"(?:he|she|they|someone|somebody|a man|a woman|(?!{_PEER}\b)my [a-z]+(?: [a-z]+)?|[a-z]+'s [a-z]+|"
    r"dad|daddy|mom|mommy|mum|mummy|father|mother|step\w+|uncle|aunt|auntie|teacher|coach|"
    r"grandpa|grandma|granddad|grandad|granny|babysitter|nanny)"
)
_PARENTS = r"(?:parents|mom|mum|mommy|mummy|mama|dad|daddy|papa|mother|father|family|grown-?ups)"
_HURTS = r"(?:hits|hit|beats|beat|kicks|kicked|chokes|choked|slaps|slapped|burns|burned|hurts|hurt) me"
_ONLINE = (
    r"\b(?:online|internet|on (?:discord|snapchat|snap|instagram|insta|tiktok|roblox|minecraft|fortnite|"
    r"whatsapp|telegram|a game|the game|a chat|an app))\b|\b(?:in|from) (?:a|the|that|this) (?:game|app|chat)\b"
)
_CONTACT = (
    r"\b(?:meet|meeting|meet up|come over|pick me up|visit me|my address|where i live|what school|which school|"
    r"my school|send (?:him|her|them) (?:a )?(?:photos?|pics?|pictures?|selfies?)|photos? of me|pics? of me|"
    r"(?:my|your) (?:phone )?number)\b"
)

# (category, level, pattern). Order matters only for naming the category of a text that
# matches several at the same level: the first wins.
_RULES: tuple[tuple[Category, RiskLevel, re.Pattern[str]], ...] = (
    (
        "self_harm",
        "high",
        _rx(
            r"\b(?:kill|hurt|harm|cut|hang|stab|starve|knife|shoot) (?:myself|my self|me self)\b",
            r"\bsuicid",
            r"\bself[- ]?harm",
            r"\b(?:want|wanna|going|gonna|plan(?:ning)?|ready) to die\b",
            r"\bend (?:my life|it all)\b",
            r"\btake my (?:own )?life\b",
            r"\b(?:don'?t|do not|dont) want to (?:live|be alive|exist|wake up)(?: anymore)?\b",
            r"\bi (?:wish|want) (?:i was|i were|to be) dead\b",
            r"\bno reason to live\b",
            r"\bbetter off (?:dead|without me)\b",
            r"\bnobody would (?:miss|care about) me\b",
        ),
    ),
    (
        "abuse",
        "high",
        _rx(
            rf"\b{_WHO} {_HURTS}\b",
            rf"\b{_WHO} (?:touched|touches|touching) (?:me|my)\b",
            r"\bprivate (?:parts?|places?)\b",
            r"\b(?:abuse[sd]?|abusing|molest\w*|rape[sd]?|raping)\b",
            r"\bi'?m (?:scared|afraid|frightened) (?:of|to go) (?:going )?(?:home|him|her|"
            r"my (?:dad|mom|mum|father|mother|step\w*|uncle|aunt|teacher|coach|brother|sister))\b",
            r"\b(?:locks?|locked) me (?:in|up)\b",
        ),
    ),
    (
        "danger",
        "high",
        _rx(
            r"\b(?:can'?t|cannot|cant) breathe\b",
            r"\bbleeding (?:a lot|badly|everywhere|really bad)\b",
            r"\b(?:swallowed|ate|drank|took) (?:some |the |a lot of |lots of |all the |a |my \w+'?s? )?"
            r"(?:pills|tablets|medicine|bleach|poison|detergent|button batter(?:y|ies)|batter(?:y|ies))\b",
            r"\boverdos",
            r"\b(?:house|room|kitchen|flat|apartment|building) is on fire\b",
            r"\b(?:fire|smoke) in (?:the|my|our) (?:house|room|kitchen|flat|apartment)\b",
            r"\b(?:someone|somebody|a man|a woman|a stranger) (?:is )?(?:trying to )?(?:breaking|break|broke) in\b",
            r"\bfound (?:a|my \w+'?s?|the) (?:gun|pistol|revolver|rifle)\b",
            r"\b(?:bring|brought|bringing|take|taking) (?:a |my \w+'?s? )?(?:gun|knife|weapon) to school\b",
            r"\bsomeone is following me\b",
            r"\bi'?m lost and (?:scared|alone)\b",
        ),
    ),
    (
        "strangers",
        "high",
        _rx(
            r"\bstranger\b.{0,60}\b(?:meet|car|follow\w*|sweets|candy|come with|address|home|photos?|pics?|secret)\b",
            r"\b(?:meet|meeting|see) (?:up )?(?:\w+ )?(?:in person|irl|in real life)\b",
            r"\b(?:told|tells|asked|asks|said|says) (?:me )?(?:not to|to not|don'?t|never to) tell\b",
            rf"\b(?:not to|to not|don'?t|do not|never|dont) tell (?:my |your |ur )?{_PARENTS}\b",
            # secrecy and grooming: a secret kept from the family, a chat to hide, a meeting
            r"\bkeep (?:it|this|that|our|the|a|them|these) (?:(?:a|our|little|big) )*secrets?\b",
            r"\bkeep (?:it|this|that) (?:between (?:us|you and me)|to (?:yourself|ourselves))\b",
            r"\b(?:our|a|it'?s (?:a|our)) little secret\b",
            r"\b(?:our|a) (?:little )?secret\b.{0,40}\b(?:parents|mom|mum|dad|tell)\b",
            r"\b(?:delete|deleting|erase|clear|hide) (?:this|the|our|these|all (?:the|our|these)|my) "
            r"(?:chats?|messages?|conversations?|texts?|dms?)\b",
            r"\bmeet (?:up with )?(?:the|a|that|this|my) (?:man|guy|lady|woman|stranger|friend|boy|girl|person)"
            r" (?:from|on|in|i met on|i met in) (?:the |a |that |this )?(?:game|internet|online|app|chat|discord|"
            r"roblox|minecraft|fortnite|snapchat|tiktok|instagram)\b",
            rf"(?:{_ONLINE}).{{0,80}}(?:{_CONTACT})",
            rf"(?:{_CONTACT}).{{0,80}}(?:{_ONLINE})",
        ),
    ),
    (
        "sexual",
        "high",
        _rx(
            r"\bnudes?\b",
            r"\bporn",
            r"\bsext",
            r"\bnaked (?:pics?|pictures?|photos?|selfies?|videos?)\b",
            r"\bsex(?:ual)? (?:with|pictures?|photos?|videos?|chat)\b",
            r"\bonlyfans\b",
        ),
    ),
    (
        "self_harm",
        "medium",
        _rx(
            r"\bi hate myself\b",
            r"\bi feel (?:so |really )?(?:worthless|hopeless|empty|alone all the time)\b",
            r"\b(?:nobody|no one|noone) (?:loves|likes|cares about) me\b",
            r"\beveryone hates me\b",
        ),
    ),
    ("abuse", "medium", _rx(rf"\b{_PEER}(?: [a-z]+){{0,3}} {_HURTS}\b", r"\b(?:bully|bullies|bullied|bullying)\b")),
    (
        "danger",
        "medium",
        _rx(
            r"\b(?:play(?:ing)? with|light(?:ing)?) (?:matches|a lighter|fire|fireworks)\b",
            r"\bi'?m lost\b",
            r"\b(?:home alone|alone at home) and (?:scared|afraid)\b",
        ),
    ),
    (
        "strangers",
        "medium",
        _rx(
            rf"\b(?:new friend|someone|somebody|a (?:guy|girl|boy|man|woman|person)) (?:i met |i know |i talk to )?"
            rf"(?:{_ONLINE})",
            r"\bstranger\b",
            r"\bfriend request from\b",
        ),
    ),
    ("sexual", "medium", _rx(r"\bsex\b", r"\bsexy\b", r"\bhorny\b", r"\bnaked\b")),
    (
        "personal_data",
        "medium",
        _rx(
            r"\bmy (?:home |house |real )?address is\b",
            r"\bi live (?:at|on) (?:number )?\d",
            # "12 Oak Street", "10 Main St": a number, one to three name words, a street word
            r"\b\d{1,5}[a-z]? (?:(?!(?:the|a|an|on|in|at|to|of|and|my|for|with|more|miles|km)\b)[a-z]+ ){1,3}"
            r"(?:street|st|road|rd|avenue|ave|lane|ln|drive|boulevard|blvd|terrace|crescent|gardens)\b",
            r"\bmy (?:post ?code|zip(?: code)?|password|pin|passcode) is\b",
            r"\b(?:home alone|alone at home|alone in the house)\b",
            r"\b(?:my school is|i go to|i'?m at|i am at) [a-z' ]{0,40}\b(?:school|academy|primary|elementary|high)\b",
            r"\bmy (?:phone|mobile|cell)(?: number)? is\b",
            r"\b[\w.+-]+@[\w-]+\.[\w.]+\b",
        ),
    ),
)

# Emoji a child sends instead of words. Each is read as the word it stands for, so the word
# rules see "I took 💊💊" as "i took pills"; and together they are signs of their own, so
# emoji alone are read too: a weapon or pills beside a sign of death or hurt is self-harm, a
# weapon beside an angry face a threat, two sexual signs (or 🔞) sexual. A weapon alone is a
# blocked topic (halo/safety/topics.py), not a risk: 🔪 on a shopping list is a kitchen knife.
EMOJI_WORDS: dict[str, str] = {
    "🔪": "knife", "🗡": "knife", "⚔": "swords", "🔫": "gun", "💣": "bomb", "🧨": "explosives", "🪓": "axe",
    "💊": "pills", "💉": "needle", "🪢": "rope", "🩸": "blood", "💀": "dead", "☠": "dead", "⚰": "coffin",
    "🪦": "grave",
}  # fmt: skip
_WEAPONS = frozenset("🔪🗡⚔🔫💣🧨🪓")
_MEANS = frozenset("🔪🗡🔫🪓💊💉🪢")  # what a child could hurt themself with
_HURT_SIGNS = frozenset("😵💀☠⚰🪦🩸😭💔🥀")  # death, blood, despair
_ANGER = frozenset("😡😠🤬👿💢👊")
_SEXUAL = frozenset("🍆🍑💦👅")
_SEXUAL_MOOD = frozenset("🥵😈😏🔞")


def _emoji_signs(text: str) -> Assessment:
    """What the emoji in `text` say together, whatever words are around them."""
    seen = set(text)
    if seen & _MEANS and seen & _HURT_SIGNS:
        return Assessment("high", "self_harm")
    if "🔞" in seen or len(seen & _SEXUAL) >= 2 or (seen & _SEXUAL and seen & _SEXUAL_MOOD):
        return Assessment("medium", "sexual")
    if seen & _WEAPONS and seen & _ANGER:
        return Assessment("medium", "danger")
    return LOW


def _emoji_as_words(text: str) -> str:
    if not any(ch in EMOJI_WORDS for ch in text):
        return text
    return " ".join("".join(f" {EMOJI_WORDS[ch]} " if ch in EMOJI_WORDS else ch for ch in text).split())


_PHONE_RUN = re.compile(r"\+?\(?\d[\d\s().-]{6,}\d")
_PHONE_WORDS = re.compile(r"\b(?:phone|number|call|text me|whatsapp|mobile|cell|ring me)\b")
_APOSTROPHES = str.maketrans({"’": "'", "‘": "'", "`": "'", "\ufe0f": None, "\u200d": None})


def normalise(text: str) -> str:
    return re.sub(r"\s+", " ", text.translate(_APOSTROPHES).lower()).strip()


def _has_phone_number(text: str) -> bool:
    """Nine or more digits with phone punctuation, or eight with a phone word nearby: dates
    (2024-06-01) and plain sums (123456789 × 2) stay out."""
    for match in _PHONE_RUN.finditer(text):
        run = match.group()
        digits = sum(ch.isdigit() for ch in run)
        shaped = run.startswith(("+", "0", "(")) or any(ch in run for ch in " -.()")
        if 9 <= digits <= 15 and shaped:
            return True
        if 8 <= digits <= 15 and _PHONE_WORDS.search(text):
            return True
    return False


def screen(text: str) -> Assessment:
    """The floor's risk level and category for `text` (a child's message or a reply to one)."""
    norm = normalise(text)
    signs = _emoji_signs(norm)
    if signs.level == "high":
        return signs
    found = signs
    norm = _emoji_as_words(norm)
    for category, level, pattern in _RULES:
        if LEVELS[level] > LEVELS[found.level] and pattern.search(norm):
            found = Assessment(level, category)
            if level == "high":
                return found
    if found.level == "low" and _has_phone_number(norm):
        found = Assessment("medium", "personal_data")
    return found
