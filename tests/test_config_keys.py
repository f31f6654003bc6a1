"""No "applied" that isn't: every key of halo.yaml, derived from the `Settings` model so a new
key cannot be forgotten, is changed on its own in the file and reloaded into a real halo. Each
either reaches the running parts that use it, or is named in `restart_needed`. Then the three
a family met: a budget, routing and model prices added while halo runs take effect on the
next message."""

from __future__ import annotations

import copy
import fnmatch
import json
import logging
import re
import types
import typing
from collections.abc import AsyncIterator, Callable, Iterator
from datetime import time
from pathlib import Path
from typing import Any, Literal

import pytest
from pydantic import BaseModel, SecretStr

from config.loader import ConfigError, load_settings, read_yaml, settings_from
from config.paths import HaloPaths
from config.settings import Settings
from halo.core.envelope import Envelope, Speaker
from halo.core.scopes import resolve_scope
from halo.inventory import Halo
from halo.routing.levels import Level
from halo.runtime.app import build_halo
from tests.conftest import llm_yaml, write_home
from tests.fakes.llm_server import FakeOpenAI

# halo.yaml keys whose Settings field is named otherwise, and the one field that is no key
FILE_NAMES = {"home_events": "home"}
NOT_IN_FILE = {"home"}  # Settings.home is HALO_HOME itself
# a name for `*` in a key under a mapping of sections (llm.prices.<model>.input, …)
ENTRY = {"llm.prices": "walk-model", "safety.profiles": "adolescent", "home.member_quiet_hours": "mom"}
# what a section that is absent until set must hold besides the key being walked
WHOLE = {
    "llm.prices.walk-model": {"input": 1, "output": 2},
    "home.quiet_hours": {"start": "22:00", "end": "07:00"},
    "home.member_quiet_hours.mom": {"start": "21:00", "end": "06:30"},
}
# keys the generic candidates below cannot change validly: a value each would take
VALUES: dict[str, Any] = {
    "members": "+nani",  # the test family and one more
    "owner": "mom",
    "family.timezone": "Europe/Paris",
    "work.digest": "mon-fri 08:30",
    "backups.schedule": "daily 03:30",
    "storage.url": "postgresql://halo@127.0.0.1:1/walk",
    "storage.family_id": "walk-family",
    "tools.search_url": "http://127.0.0.1:9/search",
    "home.rules": [
        {"id": "walk", "when": {"topic": "walk/t", "field": "x", "equals": True}, "say": "walk", "to": ["parents"]}
    ],
    "safety.topics": {"violence": ["walkword"]},
    "safety.profiles.*.tool_classes": ["internal"],
    "safety.profiles.*.blocked_topics": ["violence"],
    "llm.models": {"young_child": "walk-model"},
    "mqtt.ca_certs": "/tmp/walk-ca.pem",
}
NANI = {"id": "nani", "name": "Nani", "role": "parent", "web_token": "nani-token"}


def file_keys(model: type[BaseModel] = Settings, prefix: str = "") -> Iterator[str]:
    """Every leaf key of halo.yaml, dotted; `*` where the file names the entry (a model's price)."""
    for field_name, field in model.model_fields.items():
        if not prefix and field_name in NOT_IN_FILE:
            continue
        key = prefix + (FILE_NAMES.get(field_name, field_name) if not prefix else field_name)
        section = _model_in(field.annotation)
        entries = _mapping_of_models(field.annotation)
        if section is not None:
            yield from file_keys(section, key + ".")
        elif entries is not None:
            yield from file_keys(entries, key + ".*.")
        else:
            yield key


def _model_in(annotation: Any) -> type[BaseModel] | None:
    for candidate in typing.get_args(annotation) if _is_union(annotation) else (annotation,):
        if isinstance(candidate, type) and issubclass(candidate, BaseModel):
            return candidate
    return None


def _mapping_of_models(annotation: Any) -> type[BaseModel] | None:
    if typing.get_origin(annotation) is dict:
        return _model_in(typing.get_args(annotation)[1])
    return None


def _is_union(annotation: Any) -> bool:
    return typing.get_origin(annotation) in (typing.Union, types.UnionType)


def _leaf_annotation(key: str) -> Any:
    model: Any = Settings
    parts = key.split(".")
    for i, part in enumerate(parts):
        name = "home_events" if i == 0 and part == "home" else part
        if part == "*":
            continue
        annotation = model.model_fields[name].annotation
        if i == len(parts) - 1:
            return annotation
        model = _model_in(annotation) or _mapping_of_models(annotation)
    raise AssertionError(key)


def concrete(key: str) -> str:
    for pattern, name in ENTRY.items():
        if key.startswith(pattern + ".*"):
            return key.replace(pattern + ".*", f"{pattern}.{name}", 1)
    return key


def candidates(key: str, now: Any) -> list[Any]:
    """Values to try for `key`, whose value in the test family is `now`."""
    for pattern, value in VALUES.items():
        if fnmatch.fnmatchcase(key, pattern):
            return [value]
    annotation = _leaf_annotation(key)
    options = typing.get_args(annotation) if _is_union(annotation) else (annotation,)
    found: list[Any] = []
    for option in options:
        if option is bool:
            found.append(not now)
        elif typing.get_origin(option) is Literal:
            found += [choice for choice in typing.get_args(option) if choice != now]
        elif option is int:
            found += [v for v in ((now or 0) + 1, (now or 0) - 1, 1, 300) if v != now]
        elif option is float:
            found += [v for v in ((now or 0) * 0.5, (now or 0) * 1.1, (now or 0) + 1, 0.5, 30.0) if v != now]
        elif option in (str, SecretStr):
            found += ["walk-value", "http://127.0.0.1:9/walk"]
        elif typing.get_origin(option) in (list, tuple):
            found += [["walk"], [9]]
        elif option is time:
            found.append("05:45")
    return found


def set_key(document: dict[str, Any], key: str, value: Any) -> dict[str, Any]:
    changed = copy.deepcopy(document)
    parts = key.split(".")
    node = changed
    for i, part in enumerate(parts[:-1]):
        whole = ".".join(parts[: i + 1])
        if node.get(part) is None:
            node[part] = copy.deepcopy(WHOLE.get(whole, {}))
        node = node[part]
    if value == "+nani":
        value = [*node[parts[-1]], NANI]
    node[parts[-1]] = value
    return changed


def value_at(settings: Settings, key: str) -> Any:
    node: Any = settings
    for i, part in enumerate(key.split(".")):
        name = "home_events" if i == 0 and part == "home" else part
        node = node[name] if isinstance(node, dict) else getattr(node, name)
    return node


def a_change(home: Path, document: dict[str, Any], started: Settings, key: str) -> dict[str, Any] | None:
    """halo.yaml with `key` alone changed to a valid value halo did not start with."""
    file_key = concrete(key)
    try:
        now = value_at(started, file_key)
    except (KeyError, AttributeError):
        now = None
    for value in candidates(key, now):
        changed = set_key(document, file_key, value)
        try:
            settings = settings_from(HaloPaths(home), changed)
        except ConfigError:
            continue
        try:
            if value_at(settings, file_key) != now:
                return changed
        except (KeyError, AttributeError):
            continue
    return None


def readers(halo: Halo) -> dict[str, list[Callable[[], Any]]]:
    """Where each live section is read by the parts that use it, in the running halo."""
    gateway = halo.gateway
    router = gateway.router
    assert router.budget is not None
    answerers = [a for a in gateway.code_answers.answerers if hasattr(a, "routing")]
    assert len(answerers) == 2, "the status answers and the plain words read routing"
    family = halo.live_family.current
    return {
        "family": [family],
        "members": [family],
        "owner": [family],
        "parents_group": [family],
        "family_group": [family],
        "work": [family],
        "safety": [family, lambda: halo.safety.family],
        "home": [lambda: halo.home.settings],
        "home.keep_observations": [lambda: halo.home.store.keep],
        "routing": [
            router.settings,  # and the turn's plan it makes: the agents, context and model run read that
            gateway.turn_log.routing,
            *(a.routing for a in answerers),
        ],
        "budget": [router.budget.settings],
        "llm.prices": [lambda: router.budget.prices],  # type: ignore[union-attr]
        "reminders": [halo.reminders.settings, halo.reminder_clock.settings],
    }


def read_through(section: Any, rest: list[str]) -> Any:
    """The value a part reads for the rest of a key below its section."""
    node = section
    for part in rest:
        if node is None:
            return None
        if hasattr(node, "of"):  # Prices: a model's price, by name
            node = node.of(part)
        elif isinstance(node, dict):
            node = node[part]
        else:
            node = getattr(node, part)
    return node


def _stripped_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Only halo.yaml speaks: a HALO_* variable would hide the file's change."""
    import os

    for name in list(os.environ):
        if name.startswith("HALO_"):
            monkeypatch.delenv(name)


@pytest.fixture
async def walked(home: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Halo]:
    _stripped_environment(monkeypatch)
    write_home(home)
    halo = build_halo(load_settings(home))
    yield halo
    await halo.close()


async def test_every_key_of_halo_yaml_applies_live_or_is_reported_as_needing_a_restart(
    walked: Halo, home: Path
) -> None:
    halo = walked
    config = home / "halo.yaml"
    document = json.loads(json.dumps(read_yaml(config), default=str))
    started = halo.config.started
    keys = list(file_keys())
    assert {"budget.daily_usd", "routing.enabled", "llm.prices.*.input", "llm.model", "members"} <= set(keys)
    sections = readers(halo)
    unchangeable, wrong = [], []
    for key in keys:
        changed = a_change(home, document, started, key)
        if changed is None:
            unchangeable.append(key)
            continue
        config.write_text(json.dumps(changed))  # JSON is YAML
        assert await halo.config.reload("api"), f"{key}: {halo.config.error}"
        needed = halo.config.restart_needed
        if needed:
            if not any(fnmatch.fnmatchcase(key, r) or key.startswith(r + ".") for r in needed):
                wrong.append(f"{key}: restart_needed names {needed}, not it")
            continue
        file_key = concrete(key)
        expected = value_at(load_settings(home), file_key)
        section = max((s for s in sections if file_key == s or file_key.startswith(s + ".")), key=len, default=None)
        if section is None:
            wrong.append(f"{key}: said applied, but no part reads it live")
            continue
        rest = file_key.split(".")[len(section.split(".")) :]
        if section in ("family", "members", "owner", "parents_group", "family_group", "work", "safety"):
            rest = file_key.split(".")  # the family holds these under their own names
        for reader in sections[section]:
            seen = read_through(reader(), rest)
            if seen != expected:
                wrong.append(f"{key}: said applied, but a part still reads {seen!r}, not {expected!r}")
    assert not unchangeable, f"give these keys a value in VALUES: {unchangeable}"
    assert not wrong, "\n".join(wrong)


def routed_home(home: Path, fake: FakeOpenAI, extra: str = "") -> Path:
    prices = "\n  prices:\n    fake-model: {input: 100, output: 200}\n"
    return write_home(home, llm_yaml(fake) + prices + "memory: {semantic: {embedder: none}}\n" + extra)


def message(halo: Halo, member_id: str, text: str) -> Envelope:
    member = halo.family.member(member_id)
    assert member is not None
    user_id = str(member.telegram_user_id)
    return Envelope(
        "telegram", resolve_scope(halo.family, f"telegram:{user_id}"), Speaker(user_id, member=member), text
    )


@pytest.fixture
async def running(home: Path, fake_llm: FakeOpenAI, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Halo]:
    _stripped_environment(monkeypatch)
    halo = build_halo(load_settings(routed_home(home, fake_llm)))
    yield halo
    await halo.close()


async def test_a_budget_added_while_halo_runs_caps_the_next_message(
    running: Halo, home: Path, fake_llm: FakeOpenAI
) -> None:
    halo = running
    first = await halo.gateway.handle(message(halo, "aarav", "what is on my list for the weekend?"))
    await halo.gateway.drain()
    assert first.kind == "model"
    config = home / "halo.yaml"
    config.write_text(config.read_text() + "budget: {daily_usd: 0.000001, cheap_overrun_share: 0}\n")
    await halo.config.poll()  # the watcher's two looks: the file changed, then held still
    await halo.config.poll()
    assert halo.config.reloads == 1 and halo.config.restart_needed == []
    calls = len(fake_llm.model_requests)
    kept = await halo.gateway.handle(message(halo, "aarav", "what should I get Sam for his party?"))
    assert kept.text is not None and "budget is spent; your message is saved" in kept.text
    assert len(fake_llm.model_requests) == calls, "no model was asked past the budget"


async def today_usd(halo: Halo) -> float:
    """What a parent's /usage says today cost."""
    reply = await halo.gateway.handle(message(halo, "mom", "/usage"))
    assert reply.text is not None
    found = re.search(r"Today: \$(\d+\.\d+)", reply.text)
    assert found, reply.text
    return float(found.group(1))


async def test_routing_and_prices_edited_while_halo_runs_take_effect_on_the_next_message(
    running: Halo, home: Path, fake_llm: FakeOpenAI
) -> None:
    halo = running  # the test family has routing off: every message reaches the model
    calls = len(fake_llm.model_requests)
    await halo.gateway.handle(message(halo, "mom", "thanks!"))
    await halo.gateway.drain()
    assert len(fake_llm.model_requests) == calls + 1
    before = await today_usd(halo)
    assert before > 0

    config = home / "halo.yaml"
    text = config.read_text().replace("routing: {enabled: false}", "routing: {enabled: true, triage: false}")
    config.write_text(
        text.replace("fake-model: {input: 100, output: 200}", "fake-model: {input: 10000, output: 20000}")
    )
    assert await halo.config.reload("api") and halo.config.restart_needed == []

    calls = len(fake_llm.model_requests)
    thanks = await halo.gateway.handle(message(halo, "mom", "thanks!"))
    assert thanks.route is not None and thanks.route.level == Level.L0
    assert len(fake_llm.model_requests) == calls, "routing on: thanks needs no model"
    # the same tokens at the new price: a hundred times what they cost before
    assert await today_usd(halo) == pytest.approx(100 * before, rel=0.01)


async def test_a_budget_set_while_halo_runs_says_which_models_it_cannot_count(
    running: Halo, home: Path, caplog: pytest.LogCaptureFixture
) -> None:
    config = home / "halo.yaml"
    unpriced = config.read_text().replace(
        "    fake-model: {input: 100, output: 200}\n", "    other-model: {input: 1, output: 1}\n"
    )
    config.write_text(unpriced + "budget: {daily_usd: 1}\n")
    with caplog.at_level(logging.WARNING, logger="halo.runtime.usage_wiring"):
        assert await running.config.reload("api")
    assert "budget: fake-model has no known price (set llm.prices): its calls do not count" in caplog.text
