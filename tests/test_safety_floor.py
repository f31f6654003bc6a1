"""The deterministic floor, blocked topics, shortening and profile merging: no model, no I/O."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from config.family import Family
from config.safety import DEFAULT_PROFILES, SafetyConfig
from halo.safety.profiles import strictest
from halo.safety.replies import alert_text, shorten, supportive_reply
from halo.safety.screen import Assessment, screen, stricter
from halo.safety.topics import blocked_topic

FLOOR = [
    # self-harm
    ("I want to hurt myself", "high", "self_harm"),
    ("sometimes i just want to die", "high", "self_harm"),
    ("nobody would miss me if I was gone", "high", "self_harm"),
    ("I don’t want to be alive anymore", "high", "self_harm"),
    ("I feel so hopeless", "medium", "self_harm"),
    # abuse
    ("Dad hits me when he is angry", "high", "abuse"),
    ("my uncle touches me and says it is our secret", "high", "abuse"),
    ("my brother hit me", "medium", "abuse"),
    ("kids at school are bullying me", "medium", "abuse"),
    # danger
    ("I swallowed some pills", "high", "danger"),
    ("the kitchen is on fire", "high", "danger"),
    ("I found my dad's gun", "high", "danger"),
    ("I'm lost", "medium", "danger"),
    # strangers
    ("a guy I met online wants to meet me alone and says not to tell my parents", "high", "strangers"),
    ("someone on roblox asked what school I go to", "high", "strangers"),
    ("my new friend online is really nice", "medium", "strangers"),
    # sexual
    ("he wants me to send nudes", "high", "sexual"),
    ("what does sex mean", "medium", "sexual"),
    # personal data
    ("my address is 12 Oak Street", "medium", "personal_data"),
    ("call me on 555-123-4567", "medium", "personal_data"),
    ("my phone number is 07700 900123", "medium", "personal_data"),
    ("I'm home alone", "medium", "personal_data"),
    ("I go to Oak Hill Primary School", "medium", "personal_data"),
    # secrecy and grooming (issue 32)
    ("hi! the man said to keep our secret", "high", "strangers"),
    ("it's our little secret", "high", "strangers"),
    ("don't tell mom", "high", "strangers"),
    ("he said not to tell your parents", "high", "strangers"),
    ("please delete this chat", "high", "strangers"),
    ("I'm going to meet the man from the internet", "high", "strangers"),
    ("can I meet my friend from the game on Saturday", "high", "strangers"),
    # emoji, alone or with words (issue 32)
    ("🔪🔪💊💊😵", "high", "self_harm"),
    ("🩸🔪", "high", "self_harm"),
    ("I took 💊💊💊", "high", "danger"),
    ("i want to 🔪 myself", "high", "self_harm"),
    ("i want to be 💀", "high", "self_harm"),
    ("🍆💦", "medium", "sexual"),
    ("🔞", "medium", "sexual"),
    ("🔫😡", "medium", "danger"),
    # everyday
    ("💀💀 that is so funny", "low", None),
    ("🍑 smoothie please", "low", None),
    ("keep going, you are doing great", "low", None),
    ("What is the biggest animal?", "low", None),
    ("I killed it in the spelling test today!", "low", None),
    ("the lion kills its prey", "low", None),
    ("on 2024-06-01 we went to the zoo", "low", None),
    ("what is 123456789 times 2", "low", None),
    ("I ran 5 miles on the way home", "low", None),
    ("I cut my finger on paper", "low", None),
    ("I hate my homework", "low", None),
]


@pytest.mark.parametrize(("text", "level", "category"), FLOOR, ids=[row[0][:40] for row in FLOOR])
def test_floor(text: str, level: str, category: str | None) -> None:
    found = screen(text)
    assert (found.level, found.category) == (level, category)


def test_stricter_keeps_the_higher_level_and_any_topic() -> None:
    floor = Assessment("medium", "personal_data")
    model = Assessment("high", "strangers", source="classifier", summary="s")
    assert stricter(floor, model).level == "high"
    assert stricter(model, floor).category == "strangers"
    assert stricter(Assessment(topic="gambling"), model).topic == "gambling"
    assert stricter(floor, Assessment(source="classifier")) == floor  # a model saying "low" lowers nothing


def test_blocked_topics_library_custom_and_own_words() -> None:
    topics = ("gambling", "alcohol", "fortnite")
    assert blocked_topic("what is a casino?", topics) == "gambling"
    assert blocked_topic("The pirates drank RUM", topics) == "alcohol"
    assert blocked_topic("can we play Fortnite", topics) == "fortnite"
    assert blocked_topic("a rumour spread at school", topics) is None  # words, not substrings
    assert blocked_topic("the crumble was yummy", ("alcohol",), {"alcohol": ("crumble",)}) == "alcohol"
    assert blocked_topic("🔫🔫", ("weapons",)) == "weapons"  # an emoji matches wherever it is
    assert blocked_topic("can we get 🍺?", topics) == "alcohol"
    assert blocked_topic("I need my 💊 for my cough", ("drugs",)) == "drugs"
    assert blocked_topic("🍕🎉", ("weapons", "drugs", "alcohol")) is None


@settings(max_examples=60, deadline=None)
@given(st.text(min_size=0, max_size=3000), st.integers(min_value=80, max_value=2000))
def test_shorten_never_exceeds_the_limit(text: str, limit: int) -> None:
    assert len(shorten(text, limit)) <= limit


def test_shorten_cuts_on_a_sentence_boundary() -> None:
    text = "Whales are big. " * 20 + "The end."
    short = shorten(text, 100)
    assert short.endswith("Whales are big.") and len(short) <= 100
    assert shorten("short", 100) == "short"
    words = "word " * 100
    assert shorten(words, 100).endswith("…")


def test_strictest_profile_of_a_group() -> None:
    config = SafetyConfig()
    group, merged = strictest(
        [("adolescent", config.profile("adolescent")), ("young_child", config.profile("young_child"))]
    )
    assert group == "young_child"
    assert merged.max_reply_chars == DEFAULT_PROFILES["young_child"]["max_reply_chars"]
    assert "outward" not in merged.tool_classes
    assert set(config.profile("adolescent").blocked_topics) <= set(merged.blocked_topics)
    assert merged.notify_parents_on_medium


def test_profile_overrides_keep_the_other_defaults() -> None:
    family = Family.model_validate(
        {
            "members": [{"id": "tara", "name": "Tara", "role": "child"}],
            "safety": {"profiles": {"young_child": {"max_reply_chars": 300}}},
        }
    )
    tara = family.member("tara")
    assert tara is not None and tara.age_group == "young_child"
    profile = family.profile_of(tara)
    assert profile is not None and profile.max_reply_chars == 300
    assert profile.blocked_topics == DEFAULT_PROFILES["young_child"]["blocked_topics"]
    with pytest.raises(ValueError, match="unknown age group"):
        Family.model_validate({"safety": {"profiles": {"toddler": {}}}})


def test_alert_text_quotes_only_when_allowed_and_never_over_chat_apps() -> None:
    family = Family.model_validate(
        {"members": [{"id": "aarav", "name": "Aarav", "role": "child", "age_group": "adolescent"}]}
    )
    aarav = family.members[0]
    found = Assessment("high", "strangers", source="classifier", summary="Someone online wants to meet him.")
    private = alert_text(aarav, datetime.now(UTC), "in their private chat", found, words=None, action="x")
    for text in (private.push, private.inbox):
        assert "contact with a stranger" in text and "Someone online" not in text and '"' not in text
    shared = alert_text(aarav, datetime.now(UTC), "in their private chat", found, words="meet me", action="x")
    assert '"meet me"' in shared.inbox and "Someone online" in shared.inbox
    assert "meet me" not in shared.push and "Someone online" not in shared.push and "inbox" in shared.push


def test_supportive_reply_has_emergency_help_only_for_safety() -> None:
    emergency = "Call 112."
    assert emergency in supportive_reply("young_child", Assessment("high", "danger"), [], emergency)
    assert emergency not in supportive_reply("adolescent", Assessment("high", "sexual"), [], emergency)
