"""The Telegram adapter's pure parts: cutting and formatting replies, reading updates."""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from telegram import Message

from adapters.telegram.format import TELEGRAM_LIMIT, split_message, to_html, utf16_len
from adapters.telegram.normalise import BotIdentity, is_for_bot, to_incoming
from config.family import Family
from halo.pipeline.inbound import FamilyDirectory
from tests.fakes.telegram_server import visible_text

BOT = BotIdentity(999, "halo_family_bot")
FAMILY = Family.model_validate(
    {
        "members": [
            {"id": "mom", "name": "Mom", "role": "parent", "telegram_user_id": 1002},
            {"id": "aarav", "name": "Aarav", "role": "child", "telegram_user_id": 1003},
        ],
        "parents_group": {"telegram_chat_id": -1001234},
    }
)

DIRECTORY = FamilyDirectory(lambda: FAMILY)
_text = st.text(alphabet=st.sampled_from(list("ab c\n\n😀<&>*`")), max_size=400)


@settings(max_examples=300, deadline=None)
@given(text=_text, limit=st.integers(min_value=2, max_value=60))
def test_pieces_fit_and_lose_nothing_but_whitespace_at_cuts(text: str, limit: int):
    pieces = split_message(text, limit)
    assert all(piece and utf16_len(piece) <= limit for piece in pieces)
    assert re.sub(r"\s", "", "".join(pieces)) == re.sub(r"\s", "", text)


def test_paragraphs_stay_whole_when_they_fit():
    paragraphs = ["a" * 3000, "b" * 1000, "c" * 3000]
    assert split_message("\n\n".join(paragraphs)) == ["a" * 3000 + "\n\n" + "b" * 1000, "c" * 3000]
    assert split_message("short") == ["short"]
    assert len(split_message("😀" * 3000)) == 2  # an emoji counts twice towards Telegram's limit
    assert all(utf16_len(p) <= TELEGRAM_LIMIT for p in split_message("😀" * 3000))


@settings(max_examples=300, deadline=None)
@given(text=_text)
def test_html_is_always_valid_and_shows_the_words(text: str):
    shown = visible_text(to_html(text), "HTML")  # the fake parses as strictly as Telegram
    assert re.sub(r"[\s*`]", "", shown) == re.sub(r"[\s*`]", "", text)


@pytest.mark.parametrize(
    ("text", "html"),
    [
        ("<b>not bold</b> & co", "&lt;b&gt;not bold&lt;/b&gt; &amp; co"),
        ("**bold** and **more**", "<b>bold</b> and <b>more</b>"),
        ("** not bold **", "** not bold **"),
        ("use `rm -rf <dir>`", "use <code>rm -rf &lt;dir&gt;</code>"),
        ("```python\nif a < b:\n    pass\n```", "<pre>if a &lt; b:\n    pass</pre>"),
        ("## Plan\nstep", "<b>Plan</b>\nstep"),
        ("a_snake_case *name*", "a_snake_case *name*"),
    ],
)
def test_html_formatting(text: str, html: str):
    assert to_html(text) == html


def message(chat_id: int, from_id: int, text: str, **fields: Any) -> Message:
    data = {
        "message_id": 7,
        "date": 1_700_000_000,
        "text": text,
        "chat": {"id": chat_id, "type": "private" if chat_id > 0 else "supergroup"},
        "from": {"id": from_id, "is_bot": False, "first_name": "X", "username": "x"},
        **fields,
    }
    return Message.de_json(data, None)


def mention(text: str, offset: int = 0, length: int | None = None, kind: str = "mention", **extra: Any) -> dict:
    return {"type": kind, "offset": offset, "length": length or len(text.split()[0]), **extra}


@pytest.mark.parametrize(
    ("text", "fields", "addressed"),
    [
        ("hello all", {}, False),
        ("@halo_family_bot hi", {"entities": [mention("@halo_family_bot")]}, True),
        ("@HALO_FAMILY_BOT hi", {"entities": [mention("@HALO_FAMILY_BOT")]}, True),
        ("@other_bot hi", {"entities": [mention("@other_bot")]}, False),
        (
            "halo hi",
            {
                "entities": [
                    mention("halo", kind="text_mention", user={"id": 999, "is_bot": True, "first_name": "halo"})
                ]
            },
            True,
        ),
        ("/help", {"entities": [mention("/help", kind="bot_command")]}, True),
        ("/help@halo_family_bot", {"entities": [mention("/help@halo_family_bot", kind="bot_command")]}, True),
        ("/help@other_bot", {"entities": [mention("/help@other_bot", kind="bot_command")]}, False),
        (
            "thanks",
            {
                "reply_to_message": {
                    "message_id": 3,
                    "date": 1_700_000_000,
                    "chat": {"id": -1001234, "type": "supergroup"},
                    "from": {"id": 999, "is_bot": True, "first_name": "halo"},
                }
            },
            True,
        ),
    ],
)
def test_group_messages_are_for_halo_when_mentioned_replied_to_or_commanded(text, fields, addressed):
    assert is_for_bot(message(-1001234, 1002, text, **fields), BOT) is addressed


def envelope_of(msg: Message) -> Any:
    """What the adapter reads from a message, and what halo makes of it."""
    incoming = to_incoming(msg, BOT)
    return None if incoming is None else DIRECTORY.envelope(incoming)[0]


def test_envelope_from_a_group_message():
    msg = message(-1001234, 1003, "  hi there ")
    envelope = envelope_of(msg)
    assert envelope is not None
    assert (envelope.scope.id, envelope.scope.type, envelope.addressed) == ("telegram:-1001234", "parents_group", False)
    assert envelope.speaker.member is not None and envelope.speaker.member.id == "aarav"
    assert (envelope.text, envelope.platform_message_id, envelope.ts.year) == ("hi there", "7", 2023)


def test_envelopes_from_dms_and_what_is_not_read():
    dm = envelope_of(message(4242, 4242, "hello"))
    assert dm is not None and dm.addressed and dm.speaker.member is None and dm.speaker.username == "x"
    assert dm.scope.type == "dm" and not dm.scope.configured
    sticker = message(1002, 1002, "")
    assert to_incoming(sticker, BOT) is None


@pytest.mark.parametrize("text", ["/start", "/start@halo_family_bot", "/START"])
def test_start_is_help(text: str):
    envelope = envelope_of(message(1002, 1002, text))
    assert envelope is not None and envelope.text == "/help"
