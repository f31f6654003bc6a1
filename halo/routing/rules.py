"""The rules that pick a level from a message's words, in English first.

Each rule is a word list in code, extended from halo.yaml (`routing.*`). The rules err
upward: a message that might need memory, tools or thought is never sent to a lesser
model by a rule; what no rule recognises goes to the triage call, or to L2.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass

from halo.routing.levels import Level, SmallKind

THANKS = (
    "thanks", "thank you", "thank u", "thx", "ty", "tysm", "cheers", "many thanks", "much appreciated",
    "appreciate it", "thanks a lot", "thanks a bunch", "thank you so much", "ta",
)  # fmt: skip
GREETINGS = (
    "hi", "hello", "hey", "hiya", "heya", "yo", "howdy", "hey there", "hi there", "hello there",
    "good morning", "morning", "good afternoon", "good evening", "evening",
)  # fmt: skip
FAREWELLS = (
    "bye", "goodbye", "bye bye", "see you", "see ya", "see you later", "later", "ttyl", "good night",
    "goodnight", "night", "night night", "gn", "sleep well", "talk later",
)  # fmt: skip
ACKNOWLEDGEMENTS = (
    "ok", "okay", "k", "kk", "okey", "okie", "alright", "all right", "got it", "gotcha", "understood",
    "noted", "cool", "great", "nice", "perfect", "awesome", "sounds good", "will do", "fine", "good",
    "lol", "haha", "hahaha", "hehe", "fair enough", "brilliant", "lovely", "excellent", "sweet",
    "no problem", "np", "no worries", "all good", "right", "done", "makes sense", "good to know",
    "wow", "oh", "ah", "i see", "oh i see", "ok then", "okay then", "amazing", "super", "neat",
    "nice one", "yay", "yey", "woohoo", "hooray", "yes", "yep", "yeah", "sure",
)  # fmt: skip
# words that may sit around the above without changing what the message is
FILLER = frozenset(
    {"halo", "so", "very", "much", "a", "lot", "again", "everyone", "all", "guys", "you", "too", "for"}
    | {"that", "this", "the", "it", "and", "oh", "well", "just"}
)
THINK_HARD = (
    "think hard", "think harder", "think carefully", "think it through", "think this through",
    "take your time", "step by step", "step-by-step", "in depth", "in-depth", "in detail", "deep dive",
    "thoroughly", "thorough", "really think", "carefully consider", "reason through", "detailed plan",
)  # fmt: skip
# many-step work: planning, comparing, weighing up, reasoning over a document
MANY_STEPS = re.compile(
    r"\b(plan|planning|compare|comparison|comparing|pros and cons|itinerary|analy[sz]e|analysis|evaluate|"
    r"weigh (up|the)|trade-?offs?|strategy|timetable|schedule for|budget for|meal plan|outline|break down|"
    r"work out the best|which (one )?(is|would be) better|read through|go through)\b"
)
DOCUMENT = re.compile(
    r"\b(documents?|pdf|attached|attachment|the file|this file|report|contract|letter|statement|spreadsheet|"
    r"policy document|terms|invoice|the form|the newsletter)\b"
)
# needs memory, tools, the family's own facts or today's world: never below L2
NEEDS_CONTEXT = re.compile(
    r"\b(remember|remind|reminder|recall|forget|last time|yesterday|tomorrow|tonight|next (week|month|year)|"
    r"this (week|weekend|month|morning|afternoon|evening)|schedule|calendar|appointment|search|look up|google|"
    r"find|latest|news|weather|forecast|price|prices|book|booking|send|message|tell (mom|mum|dad)|email|write|"
    r"draft|homework|essay|explain|help me|help with|how do i|how should|should we|can you|could you|"
    # "my", "our", "we": the family's own facts. "me" or "should i" alone is not ("tell me a short joke",
    # "how long should I boil an egg?"), nor is a weekday's name without a when ("what day comes after Tuesday?")
    r"my|our|we|us|mine|about me|know me|for me|i'm|i am|i have|i've|did i|did we|"
    r"when is|when's|what time|where is|who is coming|"
    r"pick up|pickup|drop off|school|practice|dentist|doctor|party|dinner|lunch|shopping|list|task|tasks|"
    r"project|status|translate|fix|code|recipe|why did|what happened|mom|mum|dad|today|summari[sz]e|"
    r"(?:on|this|next|last|by|until|till|every|before|after school on) "
    r"(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday)s?|weekend|"
    # the family's own facts, and the work a work channel tracks
    r"password|passcode|wifi|pin|address|phone number|code|blocked|working on|in progress|progress|"
    r"left on|finished|done yet|owns|owner|release|deadline)\b"
)
# short questions about the world at large that a small model answers well
SIMPLE_QUESTION = re.compile(
    r"^(what('s| is| are| was| were| does| do)|what [a-z]+ (is|are|was|were|does|do|comes?)|who('s| is| was| were)|"
    r"how (many|much|far|old|tall|big|long|do you spell|are you|is it going)|"
    r"why (is|are|do|does)|when (was|did)|where (is|are|was|do)|which|is|are|does|do|can|"
    r"who (wrote|painted|invented|discovered|won)|how do you say|convert|"
    r"define|spell|tell me an? (?:[a-z]+ )?(joke|fun fact|riddle|story)|say something|what's up|sup|"
    r"i'm bored|im bored)\b"
)
SMALL_TALK = re.compile(
    r"^(how are you|how's it going|hows it going|what's up|whats up|sup|how was your day|i'm bored|im bored|"
    r"tell me an? (?:[a-z]+ )?(joke|fun fact|riddle)|do you like|what's your favou?rite|whats your favou?rite|"
    r"are you (a robot|real|ok)|"
    r"i love you|you're (funny|great|the best)|good job|well done)\b"
)
SMALL_TALK_WORDS = 8  # small talk this short is L1's even when it says "me" or "you"
SHORT_WORDS = 12  # a question this short, with nothing that needs context, is L1's
LONG_WORDS = 80  # a request this long is L3's, whatever it asks
MANY_STEP_WORDS = 15  # a planning or comparing request with at least this many words is L3's

_WORD = re.compile(r"[a-z0-9']+")


def words_of(text: str) -> list[str]:
    return _WORD.findall(text.lower().replace("’", "'"))


def is_emoji_only(text: str) -> bool:
    """Only pictographs, symbols, punctuation and spaces, and at least one pictograph or symbol."""
    seen_symbol = False
    for char in text:
        if char.isspace() or char in "\u200d\ufe0f":
            continue
        category = unicodedata.category(char)
        if category in ("So", "Sk", "Sm") or 0x1F000 <= ord(char) <= 0x1FAFF:
            seen_symbol = True
        elif not category.startswith("P"):
            return False
    return seen_symbol


@dataclass(frozen=True, slots=True)
class Verdict:
    """What the rules made of a message: a level, or None when they cannot tell."""

    level: Level | None
    reason: str
    small: SmallKind | None = None


class Rules:
    """The word lists, with halo.yaml's extensions; `names` are the family's first names (a
    "thanks Mom" is still thanks)."""

    def __init__(
        self,
        *,
        acknowledgements: Iterable[str] = (),
        greetings: Iterable[str] = (),
        think_hard: Iterable[str] = (),
    ) -> None:
        self.phrases: list[tuple[tuple[str, ...], SmallKind]] = sorted(
            [
                *((tuple(words_of(p)), "thanks") for p in THANKS),
                *((tuple(words_of(p)), "greeting") for p in (*GREETINGS, *greetings)),
                *((tuple(words_of(p)), "farewell") for p in FAREWELLS),
                *((tuple(words_of(p)), "acknowledgement") for p in (*ACKNOWLEDGEMENTS, *acknowledgements)),
            ],
            key=lambda found: -len(found[0]),
        )
        phrases = sorted({" ".join(words_of(p)) for p in (*THINK_HARD, *think_hard)} - {""})
        # one pattern, compiled once: judge() runs on every message
        self.think_hard = re.compile(r"\b(?:" + "|".join(map(re.escape, phrases)) + r")\b")

    def small(self, text: str, names: Iterable[str] = ()) -> SmallKind | None:
        """The kind of a message that is only thanks, a greeting, a farewell, an acknowledgement
        or emoji (with filler words and names around it); None for anything else."""
        words = words_of(text)
        if not words:
            return "emoji" if is_emoji_only(text) else None
        if "?" in text:
            return None  # "ok?" or "hello?" asks something
        allowed = FILLER | {n.lower() for n in names}
        kinds: list[SmallKind] = []
        i = 0
        while i < len(words):
            for phrase, kind in self.phrases:
                if tuple(words[i : i + len(phrase)]) == phrase:
                    kinds.append(kind)
                    i += len(phrase)
                    break
            else:
                if words[i] not in allowed:
                    return None
                i += 1
        if not kinds:
            return None
        for kind in ("thanks", "farewell", "greeting"):  # what the answer should answer
            if kind in kinds:
                return kind  # type: ignore[return-value]
        return "acknowledgement"

    def judge(
        self, text: str, *, has_document: bool = False, has_image: bool = False, names: Iterable[str] = ()
    ) -> Verdict:
        """L3, L2 or L1 when the words say so; None: the rules cannot tell. A message naming a
        member (`names`) is about the family: it needs memory, so never less than L2."""
        lowered = " ".join(words_of(text))
        count = len(lowered.split())
        if self.think_hard.search(lowered):
            return Verdict(Level.L3, "asked to think hard")
        if count >= LONG_WORDS:
            return Verdict(Level.L3, f"a long request ({count} words)")
        many_steps = MANY_STEPS.search(lowered)
        if many_steps and (count >= MANY_STEP_WORDS or has_document or DOCUMENT.search(lowered)):
            return Verdict(Level.L3, f"many steps: {many_steps.group(0)}")
        if has_image:
            return Verdict(Level.L2, "a photo to look at")
        if has_document or DOCUMENT.search(lowered):
            return Verdict(Level.L2, "about a document")
        if count <= SMALL_TALK_WORDS and SMALL_TALK.search(lowered):
            return Verdict(Level.L1, "small talk")
        named = {word.removesuffix("'s") for word in lowered.split()} & {name.lower() for name in names}
        if named:
            return Verdict(Level.L2, f"about a family member: {min(named)}")
        context = NEEDS_CONTEXT.search(lowered)
        if context:
            return Verdict(Level.L2, f"needs context or tools: {context.group(0)}")
        if count <= SHORT_WORDS and SIMPLE_QUESTION.search(lowered):
            return Verdict(Level.L1, "a short question that needs no tools")
        return Verdict(None, "the rules cannot tell")
