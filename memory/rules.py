"""Deterministic distillation rules: what in a message is a durable fact, a forget, or a note.

No model is involved, so the same words always give the same memory:

- "remember X", "note X"             → a durable fact X
- "my X is Y", "Y is my X"            → a durable fact keyed by X (a newer value supersedes)
- "forget X"                          → remove the facts matching X
- everything else                     → a temporal note

A question is never a fact, and "my meeting is tomorrow" is a note: it is about a day.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from memory.redact import only_redacted

STOPWORDS = frozenset(
    {
        "a",
        "an",
        "the",
        "my",
        "me",
        "i",
        "to",
        "of",
        "and",
        "or",
        "about",
        "that",
        "this",
        "it",
        "is",
        "are",
        "was",
        "be",
        "on",
        "in",
        "at",
        "for",
        "with",
        "from",
        "please",
        "our",
        "your",
        "his",
        "her",
        "their",
        "its",
    }
)
_PRONOUNS = frozenset(
    {
        "this",
        "that",
        "it",
        "he",
        "she",
        "they",
        "there",
        "here",
        "what",
        "who",
        "which",
        "these",
        "those",
        "everything",
        "nothing",
        "something",
    }
)
_TEMPORAL = re.compile(
    r"\b(today|tonight|tomorrow|yesterday|this (?:morning|afternoon|evening|week|weekend)|"
    r"next (?:week|month)|later|soon|right now|now)\b",
    re.I,
)
_FILLER = re.compile(
    r"^(?:(?:ok|okay|oh|and|also|btw|by the way|fyi|hey|hi|hello|halo|please|so|well)\b[,!:]?\s*)+", re.I
)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
# "Dr. Okafor", "J. Smith", "5 p.m. today" do not end a sentence.
_ABBREVIATIONS = frozenset(
    {
        "dr",
        "mr",
        "mrs",
        "ms",
        "mx",
        "prof",
        "st",
        "jr",
        "sr",
        "vs",
        "etc",
        "e.g",
        "i.e",
        "a.m",
        "p.m",
        "no",
        "approx",
        "appt",
        "ave",
        "rd",
        "mt",
        "ft",
    }
)
_LAST_WORD = re.compile(r"([^\s.]+(?:\.[^\s.]+)*)\.$")
_FORGET = re.compile(r"^forget\s+(?:about\s+)?(?:that\s+)?(?P<q>.+?)[.!]*$", re.I)
_REMEMBER = re.compile(
    r"^(?:remember|note(?: to self)?|make a note|note down)\b\s*(?:that\b\s*|:\s*|,\s*)?(?P<x>.+?)[.!]*$", re.I
)
_NOT_A_FACT = re.compile(r"^(?:when|how|what|who|where|why|if|whether|the time)\b", re.I)
_MY_X_IS_Y = re.compile(r"^my\s+(?P<k>[^\W_][\w'’ -]{0,40}?)\s+(?:is|are|=)\s+(?P<v>.+?)[.!]*$", re.I)
_Y_IS_MY_X = re.compile(r"^(?P<v>[^\W_][\w'’ .-]{0,60}?)\s+(?:is|are)\s+my\s+(?P<k>[^\W_][\w'’ -]{0,40}?)[.!]*$", re.I)
_WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)?")
# A fact heard in passing ("my X is Y" said to someone else) is kept only when it reads as a whole
# statement about the speaker once it is written as "<name>'s X: Y": not when its value speaks in
# the first or second person ("my team: like my second family"), nor when the key ends in a word that
# leaves it open ("my favorite: …", "my thing: …", "my team for sure: …"), nor when the value is a mood
# ("my kids: so excited about summer break").
_VOICE = frozenset({"i", "i'm", "i've", "i'd", "i'll", "me", "my", "mine", "you", "your", "you're", "we", "our", "us"})
_SECOND_PERSON = frozenset({"you", "your", "you're", "yours", "yourself"})
_OPEN_KEY_END = frozenset(
    {"favorite", "favourite", "fave", "pick", "thing", "one", "too", "also", "sure", "really", "now", "again", "though"}
)
_MOOD = re.compile(r"^(?:so|such|really|very|too|just|kind of|pretty|always|like|going|paying)\b", re.I)


@dataclass(frozen=True, slots=True)
class Durable:
    """A fact to keep. Keyed facts ("my shoe size is 38") have `key` and `value`."""

    text: str
    key: str | None = None
    value: str | None = None


@dataclass(frozen=True, slots=True)
class Forget:
    query: str
    mine: bool  # "forget my …": only the speaker's own facts


@dataclass(frozen=True, slots=True)
class Note:
    text: str


Action = Durable | Forget | Note


def tokens(text: str) -> list[str]:
    """Lower-case words, possessives folded ("Mom's" → "mom")."""
    return [re.sub(r"['’]s$", "", w.lower()) for w in _WORD.findall(text)]


def content_tokens(text: str) -> set[str]:
    return {t for t in tokens(text) if t not in STOPWORDS}


def normalise_key(key: str) -> str:
    key = re.sub(r"\s+", " ", key.strip().lower().replace("’", "'"))
    return re.sub(r"^(?:the|a|an) ", "", key)


def sentences(text: str) -> list[str]:
    """Split on line breaks and sentence ends, but not after an abbreviation or an initial."""
    found: list[str] = []
    for line in text.splitlines():
        joined: list[str] = []
        for piece in _SENTENCE_END.split(line):
            if joined and _ends_with_abbreviation(joined[-1]):
                joined[-1] = f"{joined[-1]} {piece}"
            else:
                joined.append(piece)
        found.extend(joined)
    return found


def _ends_with_abbreviation(piece: str) -> bool:
    m = _LAST_WORD.search(piece)
    if m is None:
        return False
    word = m.group(1)
    return word.lower() in _ABBREVIATIONS or (len(word) == 1 and word.isupper())


def classify(text: str) -> list[Action]:
    """The actions one message asks for, in order. Commands (`/…`) are not classified here."""
    text = text.strip()
    if not text or text.startswith("/"):
        return []
    actions: list[Action] = []
    rest: list[str] = []
    for sentence in sentences(text):
        sentence = sentence.strip()
        if not sentence:
            continue
        action = classify_sentence(sentence)
        if action is None:
            rest.append(sentence)
        else:
            actions.append(action)
    if rest:
        actions.append(Note(" ".join(rest)))
    return actions


def classify_sentence(sentence: str) -> Durable | Forget | None:
    """A durable fact or a forget, or None when the sentence is just something said."""
    core = _FILLER.sub("", sentence).strip()
    if not core or core.endswith("?"):
        return None
    if m := _FORGET.match(core):
        query = m.group("q").strip()
        if content_tokens(query) - _PRONOUNS:
            return Forget(query, mine=bool(re.match(r"^my\b", query, re.I)))
        return None
    if m := _REMEMBER.match(core):
        what = m.group("x").strip()
        if not what or _NOT_A_FACT.match(what) or only_redacted(what) or _SECOND_PERSON & set(tokens(what)):
            return None  # "remember, I'm always here for you" is said to someone, not a fact to keep
        keyed = _keyed(what, allow_temporal=True)
        if keyed is not None:
            return keyed
        if _MY_X_IS_Y.match(what) or _Y_IS_MY_X.match(what):
            return None  # shaped like "my X is Y" but not a keepable value (a secret, "this" …)
        if re.match(r"^to\b", what, re.I):
            what = f"Remember {what}"
        return Durable(_capitalise(what))
    return _keyed(core, allow_temporal=False)


def _keyed(text: str, allow_temporal: bool) -> Durable | None:
    m = _MY_X_IS_Y.match(text)
    if m is None:
        m = _Y_IS_MY_X.match(text)
        if m is None or m.group("v").strip().lower() in _PRONOUNS or len(m.group("v").split()) > 6:
            return None
    key, value = normalise_key(m.group("k")), m.group("v").strip().rstrip(".!")
    if not key or len(key.split()) > 5 or not value or len(value.split()) > 30 or only_redacted(value):
        return None
    if value.lower() in _PRONOUNS:
        return None
    if not allow_temporal and (_TEMPORAL.search(value) or not _whole_statement(key, value)):
        return None
    return Durable(text=f"my {key} is {value}", key=key, value=value)


def _whole_statement(key: str, value: str) -> bool:
    """Does "<name>'s key: value" read as a fact a person would accept? (see _VOICE)"""
    words = [w.replace("’", "'") for w in tokens_keep_apostrophes(value)]
    if any(w in _VOICE for w in words):
        return False
    return key.split()[-1] not in _OPEN_KEY_END and not _MOOD.match(value)


def tokens_keep_apostrophes(text: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(text)]


def _capitalise(text: str) -> str:
    return text[:1].upper() + text[1:]
