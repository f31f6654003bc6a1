"""The family policy, rule by rule, and the engine around it (loading, audit, memo, explain)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cedarpy
import pytest

from config.family import Family, Member
from policy import SYSTEM, PolicyEngine, PolicyError, ScopeRef, explain, scope_ref

FAMILY = {
    "family": {"name": "Sharma"},
    "members": [
        {"id": "wags", "name": "Wags", "role": "parent", "telegram_user_id": 1001},
        {"id": "mom", "name": "Mom", "role": "parent", "telegram_user_id": 1002},
        {
            "id": "aarav",
            "name": "Aarav",
            "role": "child",
            "age_group": "adolescent",
            "parental_visibility": False,
            "telegram_user_id": 1003,
        },
        {"id": "tara", "name": "Tara", "role": "child", "age_group": "young_child", "telegram_user_id": 1004},
        {
            "id": "veda",
            "name": "Veda",
            "role": "child",
            "age_group": "adolescent",
            "parental_visibility": True,
            "telegram_user_id": 1005,
        },
        {"id": "priya", "name": "Priya", "role": "colleague", "discord_user_id": 2001},
    ],
    "parents_group": {"telegram_chat_id": -1001},
    "family_group": {"telegram_chat_id": -1002},
    "work": {"discord_channel_ids": [3001, 3002]},
}

SCOPES: dict[str, ScopeRef] = {
    "dm:wags": ScopeRef("telegram:1001", "dm", "wags"),
    "dm:mom": ScopeRef("telegram:1002", "dm", "mom"),
    "dm:aarav": ScopeRef("telegram:1003", "dm", "aarav"),
    "dm:tara": ScopeRef("telegram:1004", "dm", "tara"),
    "dm:veda": ScopeRef("telegram:1005", "dm", "veda"),
    "dm:priya": ScopeRef("discord:dm-2001", "dm", "priya"),
    "web:mom": ScopeRef("web:mom", "dm", "mom"),
    "pg": ScopeRef("telegram:-1001", "parents_group"),
    "pg-unconfigured": ScopeRef("telegram:-1999", "parents_group", configured=False),
    "pg-suspended": ScopeRef("telegram:-1001", "parents_group", suspended=True),
    "fg": ScopeRef("telegram:-1002", "family_group"),
    "fg-unconfigured": ScopeRef("telegram:-1998", "family_group", configured=False),
    "work": ScopeRef("discord:3001", "work_channel"),
    "work2": ScopeRef("discord:3002", "work_channel"),
    "work-unconfigured": ScopeRef("discord:3999", "work_channel", configured=False),
    "home": ScopeRef("mqtt:home", "home"),
}


class Sink:
    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    def write(self, kind: str, **fields: Any) -> None:
        self.events.append({"kind": kind, **fields})


@pytest.fixture(scope="module")
def family() -> Family:
    return Family.model_validate(FAMILY)


@pytest.fixture(scope="module")
def engine(family: Family) -> PolicyEngine:
    return PolicyEngine(family)


def who(family: Family, name: str) -> Member | Any:
    if name == "unknown":
        return None
    if name == "system":
        return SYSTEM
    member = family.member(name)
    assert member is not None
    return member


def what(family: Family, name: str) -> Any:
    if name.startswith("member:"):
        return family.member(name.removeprefix("member:"))
    if name == "system":
        return SYSTEM
    return SCOPES[name]


# (principal, action, resource, from_scope, context, allowed, deciding policy id or None for default deny)
RULES: list[tuple[str, str, str, str | None, dict[str, Any] | None, bool, str | None]] = [
    # converse
    ("wags", "converse", "dm:wags", None, None, True, "own-dm"),
    ("mom", "converse", "web:mom", None, None, True, "own-dm"),
    ("tara", "converse", "dm:tara", None, None, True, "own-dm"),
    ("wags", "converse", "dm:mom", None, None, False, "dm-owner-only"),
    ("unknown", "converse", "dm:wags", None, None, False, "unknown-sender"),
    ("unknown", "converse", "pg", None, None, False, "unknown-sender"),
    ("wags", "converse", "pg-unconfigured", None, None, False, "group-untrusted"),
    ("tara", "converse", "fg-unconfigured", None, None, False, "group-untrusted"),
    ("priya", "converse", "work-unconfigured", None, None, False, "group-untrusted"),
    ("wags", "converse", "pg", None, None, True, "parents-group-parents"),
    ("mom", "converse", "pg", None, None, True, "parents-group-parents"),
    ("aarav", "converse", "pg", None, None, False, "parents-group-parents-only"),
    ("tara", "converse", "pg", None, None, False, "parents-group-parents-only"),
    ("priya", "converse", "pg", None, None, False, "parents-group-parents-only"),
    ("tara", "converse", "fg", None, None, True, "family-group-family"),
    ("mom", "converse", "fg", None, None, True, "family-group-family"),
    ("priya", "converse", "fg", None, None, False, "family-group-no-colleagues"),
    ("priya", "converse", "work", None, None, True, "work-channel-work"),
    ("wags", "converse", "work", None, None, True, "work-channel-work"),
    ("aarav", "converse", "work", None, None, False, "work-channel-no-children"),
    ("priya", "converse", "dm:priya", None, None, False, "colleague-work-only"),
    ("system", "converse", "home", None, None, True, "home-system"),
    ("wags", "converse", "home", None, None, False, "home-system-only"),
    ("system", "converse", "pg", None, None, False, "system-home-only"),
    ("wags", "converse", "pg-suspended", None, None, False, "group-suspended"),
    ("aarav", "converse", "pg-suspended", None, None, False, "group-suspended"),
    # read_memory on a scope
    ("aarav", "read_memory", "dm:aarav", "dm:aarav", None, True, "memory-own-scope"),
    ("wags", "read_memory", "pg", "pg", None, True, "memory-own-scope"),
    ("tara", "read_memory", "fg", "fg", None, True, "memory-own-scope"),
    ("priya", "read_memory", "work", "work", None, True, "memory-own-scope"),
    ("wags", "read_memory", "pg", "dm:wags", None, True, "parent-reads-parents-group"),
    ("wags", "read_memory", "dm:tara", "dm:wags", None, True, "parent-reads-child-dm"),
    ("mom", "read_memory", "dm:tara", "pg", None, True, "parent-reads-child-dm"),
    ("wags", "read_memory", "dm:veda", "dm:wags", None, True, "parent-reads-child-dm"),
    ("wags", "read_memory", "dm:aarav", "dm:wags", None, False, "dm-memory-private"),
    ("mom", "read_memory", "dm:wags", "dm:mom", None, False, "dm-memory-private"),
    ("aarav", "read_memory", "dm:tara", "dm:aarav", None, False, "dm-memory-private"),
    ("aarav", "read_memory", "dm:wags", "dm:aarav", None, False, "child-reads-parent"),
    ("aarav", "read_memory", "pg", "dm:aarav", None, False, "child-reads-parent"),
    ("tara", "read_memory", "pg", "pg", None, False, "child-reads-parent"),
    ("priya", "read_memory", "work2", "work", None, True, "work-reads-work"),
    ("wags", "read_memory", "dm:wags", "work", None, False, "family-from-work"),
    ("wags", "read_memory", "pg", "work", None, False, "family-from-work"),
    ("priya", "read_memory", "fg", "work", None, False, "family-from-work"),
    ("tara", "read_memory", "dm:tara", "fg", None, False, "family-group-own-memory"),
    ("wags", "read_memory", "pg", "fg", None, False, "family-group-own-memory"),
    ("wags", "read_memory", "dm:tara", "fg", None, False, "family-group-own-memory"),
    ("wags", "read_memory", "dm:tara", "dm:mom", None, False, "outside-scope"),
    ("wags", "read_memory", "pg-unconfigured", "dm:wags", None, False, "group-untrusted"),
    ("wags", "read_memory", "pg-suspended", "dm:wags", None, False, "group-suspended"),
    ("wags", "read_memory", "dm:wags", "pg-suspended", None, False, "group-suspended"),
    ("unknown", "read_memory", "dm:wags", "dm:wags", None, False, "unknown-sender"),
    # read_memory on a member (their USER.md)
    ("aarav", "read_memory", "member:aarav", "dm:aarav", None, True, "profile-self"),
    ("priya", "read_memory", "member:priya", "work", None, True, "profile-self"),
    ("wags", "read_memory", "member:aarav", "dm:wags", None, True, "parent-reads-child-profile"),
    ("mom", "read_memory", "member:tara", None, None, True, "parent-reads-child-profile"),
    ("aarav", "read_memory", "member:wags", "dm:aarav", None, False, "child-reads-parent"),
    ("priya", "read_memory", "member:wags", "work", None, False, "colleague-reads-self-only"),
    ("wags", "read_memory", "member:wags", "work", None, False, "family-from-work"),
    ("wags", "read_memory", "member:aarav", "work", None, False, "family-from-work"),
    ("wags", "read_memory", "member:wags", "fg", None, False, "family-group-own-memory"),
    ("mom", "read_memory", "member:wags", "dm:mom", None, False, None),
    # write_memory
    ("aarav", "write_memory", "dm:aarav", "dm:aarav", None, True, "write-own-scope"),
    ("tara", "write_memory", "fg", "fg", None, True, "write-own-scope"),
    ("wags", "write_memory", "pg", "dm:wags", None, False, "write-own-scope-only"),
    ("wags", "write_memory", "pg", None, None, False, "write-own-scope-only"),
    ("wags", "write_memory", "dm:wags", "fg", None, False, "family-group-own-memory"),
    ("aarav", "write_memory", "pg", "pg", None, False, "outside-scope"),
    # share
    ("wags", "share", "pg", "dm:wags", None, True, "share-dm-to-parents"),
    ("aarav", "share", "pg", "dm:aarav", None, True, "share-dm-to-parents"),
    ("tara", "share", "pg", "dm:tara", None, True, "share-dm-to-parents"),
    ("priya", "share", "pg", "dm:priya", None, False, "colleague-no-share"),
    ("wags", "share", "pg", "fg", None, False, "share-from-own-dm-only"),
    ("wags", "share", "pg", "dm:mom", None, False, "share-from-own-dm-only"),
    ("wags", "share", "fg", "dm:wags", None, False, "share-into-parents-group-only"),
    ("aarav", "share", "pg-unconfigured", "dm:aarav", None, False, "group-untrusted"),
    # ask_status
    ("priya", "ask_status", "work", None, None, True, "status-in-work-channel"),
    ("wags", "ask_status", "work", "work", None, True, "status-in-work-channel"),
    ("aarav", "ask_status", "work", None, None, False, "work-channel-no-children"),
    ("priya", "ask_status", "dm:priya", None, None, False, "status-work-only"),
    ("wags", "ask_status", "pg", None, None, False, "status-work-only"),
    ("priya", "ask_status", "work-unconfigured", None, None, False, "group-untrusted"),
    # receive_proactive (principal: halo itself)
    ("system", "receive_proactive", "pg", None, None, True, "proactive-parents-group"),
    ("system", "receive_proactive", "dm:mom", None, None, True, "proactive-parent-dm"),
    ("system", "receive_proactive", "fg", None, None, True, "proactive-family-group"),
    ("system", "receive_proactive", "dm:tara", None, None, False, "proactive-not-to-children"),
    (
        "system",
        "receive_proactive",
        "dm:aarav",
        None,
        {"rule_allows_children": False},
        False,
        "proactive-not-to-children",
    ),
    (
        "system",
        "receive_proactive",
        "dm:tara",
        None,
        {"rule_allows_children": True},
        True,
        "proactive-child-dm-by-rule",
    ),
    ("system", "receive_proactive", "work", None, None, False, "proactive-not-to-work"),
    ("system", "receive_proactive", "pg-unconfigured", None, None, False, "group-untrusted"),
    ("system", "receive_proactive", "pg-suspended", None, None, False, "group-suspended"),
    ("system", "receive_proactive", "dm:priya", None, None, False, None),
    # use_tool
    ("wags", "use_tool", "dm:wags", None, {"tool": "calendar", "tool_class": "private"}, True, "tool-in-scope"),
    ("aarav", "use_tool", "dm:aarav", None, {"tool": "web_search", "tool_class": "outward"}, True, "tool-in-scope"),
    ("mom", "use_tool", "fg", "fg", {"tool": "weather"}, True, "tool-in-scope"),
    ("priya", "use_tool", "work", None, {"tool": "tasks"}, True, "tool-in-scope"),
    ("wags", "use_tool", "work", None, {"tool": "update_task", "tool_class": "work"}, True, "tool-in-scope"),
    (
        "wags",
        "use_tool",
        "dm:wags",
        None,
        {"tool": "update_task", "tool_class": "work"},
        False,
        "work-tools-in-work-channels",
    ),
    ("unknown", "use_tool", "dm:wags", None, {"tool": "weather"}, False, "unknown-sender"),
    (
        "priya",
        "use_tool",
        "work",
        None,
        {"tool": "fetch_page", "tool_class": "outward"},
        False,
        "colleagues-work-tools-only",
    ),
    ("priya", "use_tool", "work", None, {"tool": "update_task", "tool_class": "work"}, True, "tool-in-scope"),
    (
        "tara",
        "use_tool",
        "dm:tara",
        None,
        {"tool": "web_search", "tool_class": "outward"},
        False,
        "young-child-no-outward-tools",
    ),
    (
        "mom",
        "use_tool",
        "fg",
        None,
        {"tool": "calendar", "tool_class": "private"},
        False,
        "no-private-tools-in-family-group",
    ),
    (
        "aarav",
        "use_tool",
        "dm:aarav",
        None,
        {"tool": "shell", "tool_class": "system"},
        False,
        "child-profile-tool-classes",
    ),
    (
        "tara",
        "use_tool",
        "dm:tara",
        None,
        {"tool": "web_search", "tool_class": "outward"},
        False,
        "child-profile-tool-classes",
    ),
    ("wags", "use_tool", "dm:wags", None, {"tool": "shell", "tool_class": "system"}, True, "tool-in-scope"),
    ("aarav", "use_tool", "pg", None, {"tool": "weather"}, False, "outside-scope"),
    ("priya", "use_tool", "dm:wags", None, None, False, "outside-scope"),
    # admin
    ("wags", "admin", "pg", None, None, True, "admin-parents"),
    ("mom", "admin", "system", None, None, True, "admin-parents"),
    ("wags", "admin", "system", "pg-suspended", None, False, "group-suspended"),
    ("aarav", "admin", "pg", None, None, False, "admin-parents-only"),
    ("priya", "admin", "system", None, None, False, "admin-parents-only"),
    ("unknown", "admin", "system", None, None, False, "unknown-sender"),
    # read_transcript
    ("aarav", "read_transcript", "dm:aarav", None, None, True, "transcript-owner"),
    ("wags", "read_transcript", "dm:tara", None, None, True, "parent-reads-child-transcript"),
    ("mom", "read_transcript", "dm:veda", None, None, True, "parent-reads-child-transcript"),
    ("wags", "read_transcript", "dm:aarav", None, None, False, "child-transcript-private"),
    ("aarav", "read_transcript", "dm:tara", None, None, False, "child-transcript-private"),
    ("wags", "read_transcript", "dm:mom", None, None, False, "parent-transcript-private"),
    ("aarav", "read_transcript", "dm:wags", None, None, False, "parent-transcript-private"),
    # remind (the resource is the member reminded; tests/test_reminders.py has the full matrix)
    ("mom", "remind", "member:mom", "dm:mom", None, True, "remind-self"),
    ("mom", "remind", "member:aarav", "dm:mom", None, True, "parent-reminds-family"),
    (
        "tara",
        "remind",
        "member:mom",
        "dm:tara",
        {"children_may_remind_parents": True},
        True,
        "child-reminds-parents-if-allowed",
    ),
    ("tara", "remind", "member:aarav", "dm:tara", None, False, "child-reminds-self-only"),
    ("wags", "remind", "member:priya", "work", None, True, "work-reminds-colleagues"),
    ("priya", "remind", "member:wags", "work", None, False, "colleague-reminders-work-only"),
    ("wags", "remind", "member:priya", "dm:wags", None, False, "colleagues-reminded-from-work-only"),
    # what the safety screen flagged in a child's message (halo/safety/gate.py) is not kept
    ("tara", "remind", "member:tara", "dm:tara", {"input_risk": "medium"}, False, "child-flagged-words-not-kept"),
    ("aarav", "write_memory", "dm:aarav", "dm:aarav", {"input_risk": "high"}, False, "child-flagged-words-not-kept"),
    ("aarav", "write_memory", "dm:aarav", "dm:aarav", {"input_risk": "low"}, True, "write-own-scope"),
    ("wags", "write_memory", "dm:wags", "dm:wags", {"input_risk": "medium"}, True, "write-own-scope"),
]


@pytest.mark.parametrize(
    ("principal", "action", "resource", "from_scope", "context", "allowed", "policy_id"),
    RULES,
    ids=[f"{r[0]}-{r[1]}-{r[2]}" + (f"-from-{r[3]}" if r[3] else "") + (f"-{r[4]}" if r[4] else "") for r in RULES],
)
def test_family_policy(
    engine: PolicyEngine,
    family: Family,
    principal: str,
    action: Any,
    resource: str,
    from_scope: str | None,
    context: dict[str, Any] | None,
    allowed: bool,
    policy_id: str | None,
) -> None:
    decision = engine.decide(
        action,
        principal=who(family, principal),
        resource=what(family, resource),
        from_scope=SCOPES[from_scope] if from_scope else None,
        unknown_id="telegram:4242" if principal == "unknown" else None,
        context=context,
    )
    assert decision.allowed is allowed, engine.explain(decision)
    assert not decision.errors, decision.errors
    if policy_id is None:
        assert decision.policy_ids == ()
        assert decision.reason.startswith("no policy permits ")
    else:
        assert policy_id in decision.policy_ids, engine.explain(decision)
        if allowed:
            assert decision.policy_ids  # an allow always names the permit


def test_every_shipped_policy_is_exercised_by_the_table(engine: PolicyEngine) -> None:
    covered = {row[-1] for row in RULES}
    shipped = {p.id for p in engine.policies}
    assert shipped - covered == set()


def test_shipped_policies_have_unique_ids_and_reasons(engine: PolicyEngine) -> None:
    assert all(p.reason for p in engine.policies)
    assert len({p.id for p in engine.policies}) == len(engine.policies)


def test_decision_labels(engine: PolicyEngine, family: Family) -> None:
    d = engine.decide("converse", principal=None, resource=SCOPES["dm:wags"], unknown_id="telegram:4242")
    assert d.principal == "unknown:telegram:4242"
    assert d.reason.startswith("An unknown sender is refused")
    d = engine.decide("read_memory", principal=who(family, "wags"), resource=who(family, "aarav"))
    assert (d.principal, d.resource) == ("wags", "member:aarav")
    d = engine.decide("converse", principal=SYSTEM, resource=SCOPES["home"])
    assert d.principal == "system:home"


def test_default_deny_reason(engine: PolicyEngine, family: Family) -> None:
    d = engine.decide(
        "read_memory", principal=who(family, "mom"), resource=who(family, "wags"), from_scope=SCOPES["dm:mom"]
    )
    assert not d.allowed
    assert d.reason == "no policy permits mom to read_memory member:wags"


def test_no_principal_is_the_system_for_proactive(engine: PolicyEngine) -> None:
    d = engine.decide("receive_proactive", principal=None, resource=SCOPES["pg"])
    assert d.allowed and d.principal == "system:home"


def test_member_missing_from_config_is_unknown(engine: PolicyEngine) -> None:
    ghost = Member(id="ghost", name="Ghost", role="parent")
    d = engine.decide("converse", principal=ghost, resource=ScopeRef("telegram:9", "dm", "ghost"))
    assert not d.allowed
    assert d.principal == "unknown:member:ghost"
    assert d.policy_ids == ("unknown-sender",)


def test_dm_owner_missing_from_config_owns_nothing(engine: PolicyEngine, family: Family) -> None:
    stranger_dm = ScopeRef("telegram:77", "dm", "stranger")
    d = engine.decide("read_memory", principal=who(family, "wags"), resource=stranger_dm, from_scope=SCOPES["dm:wags"])
    assert not d.allowed and d.policy_ids == ("dm-memory-private",) and not d.errors


def test_invalid_requests_raise(engine: PolicyEngine, family: Family) -> None:
    with pytest.raises(ValueError, match="not valid for"):
        engine.decide("read_memory", principal=SYSTEM, resource=SCOPES["pg"])
    with pytest.raises(ValueError, match="engine sets them"):
        engine.decide("use_tool", principal=who(family, "wags"), resource=SCOPES["dm:wags"], context={"in_scope": True})
    with pytest.raises(ValueError, match="unknown policy action"):
        engine.decide("fly", principal=who(family, "wags"), resource=SCOPES["dm:wags"])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="should not exist"):
        engine.decide("use_tool", principal=who(family, "wags"), resource=SCOPES["dm:wags"], context={"colour": "red"})


@dataclass(frozen=True)
class OtherScope:
    """halo's own Scope type, or anything shaped like a scope."""

    id: str
    type: str
    owner_id: str | None = None


@dataclass(frozen=True)
class ConfiguredScope(OtherScope):
    configured: bool = True


def test_any_scope_shaped_object_is_accepted(engine: PolicyEngine, family: Family) -> None:
    wags = who(family, "wags")
    dm = OtherScope("telegram:1001", "dm", "wags")
    assert engine.decide("converse", principal=wags, resource=dm).policy_ids == ("own-dm",)
    assert engine.decide("use_tool", principal=wags, resource=dm, from_scope=dm).allowed
    pg = ConfiguredScope("telegram:-1001", "parents_group")
    assert engine.decide("converse", principal=wags, resource=pg).allowed
    unnamed = ConfiguredScope("telegram:-1999", "parents_group", configured=False)
    assert engine.decide("converse", principal=wags, resource=unnamed).policy_ids == ("group-untrusted",)
    # a group that does not say whether it is configured is not trusted
    silent = OtherScope("telegram:-1001", "parents_group")
    assert engine.decide("converse", principal=wags, resource=silent).policy_ids == ("group-untrusted",)


def test_scope_ref_knows_configured_groups(family: Family) -> None:
    assert scope_ref(family, "telegram:-1001", "parents_group").configured
    assert not scope_ref(family, "telegram:-1999", "parents_group").configured
    assert scope_ref(family, "telegram:-1002", "family_group").configured
    assert scope_ref(family, "discord:3002", "work_channel").configured
    assert not scope_ref(family, "discord:1", "work_channel").configured
    assert scope_ref(family, "web:mom", "dm", "mom") == ScopeRef("web:mom", "dm", "mom", True)


# ------------------------------------------------------------------ loading the family's own policies


def write(folder: Path, name: str, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


def test_syntax_error_names_file_and_line(family: Family, tmp_path: Path) -> None:
    path = write(
        tmp_path, "extra.cedar", ('@id("bad")\nforbid (principal, action, resource)\nwhen { principal.role == };\n')
    )
    with pytest.raises(PolicyError) as caught:
        PolicyEngine(family, extra_dir=tmp_path)
    assert str(caught.value).startswith(f"{path} line 3: syntax error")
    assert caught.value.path == path and caught.value.line == 3


def test_schema_error_names_file_line_and_attribute(family: Family, tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "extra.cedar",
        (
            "// our own rules\n"
            '@id("no-foo")\n'
            "forbid (principal is Halo::Member, action, resource)\n"
            "when {\n"
            "  principal.foo == 3\n"
            "};\n"
        ),
    )
    with pytest.raises(PolicyError) as caught:
        PolicyEngine(family, extra_dir=tmp_path)
    message = str(caught.value)
    assert message.startswith(f"{path} line 5: attribute `foo` on entity type `Halo::Member` not found")
    assert 'policy @id("no-foo")' in message


def test_unknown_action_in_extra_policy(family: Family, tmp_path: Path) -> None:
    write(
        tmp_path,
        "extra.cedar",
        (
            '@id("ok")\npermit (principal, action == Halo::Action::"admin", resource);\n\n'
            '@id("typo")\nforbid (principal, action == Halo::Action::"sahre", resource);\n'
        ),
    )
    with pytest.raises(PolicyError, match=r"extra\.cedar line 5: .*sahre"):
        PolicyEngine(family, extra_dir=tmp_path)


def test_duplicate_policy_id_across_files(family: Family, tmp_path: Path) -> None:
    write(tmp_path, "extra.cedar", '\n@id("own-dm")\nforbid (principal, action, resource);\n')
    with pytest.raises(
        PolicyError,
        match=r'extra\.cedar line 2: duplicate @id\("own-dm"\), already used at '
        r".*family\.cedar line \d+",
    ):
        PolicyEngine(family, extra_dir=tmp_path)


def test_policy_without_id_is_refused(family: Family, tmp_path: Path) -> None:
    write(tmp_path, "extra.cedar", "forbid (principal, action, resource);\n")
    with pytest.raises(PolicyError, match=r"extra\.cedar line 1: policy has no @id"):
        PolicyEngine(family, extra_dir=tmp_path)


def test_missing_extra_dir_is_fine(family: Family, tmp_path: Path) -> None:
    engine = PolicyEngine(family, extra_dir=tmp_path / "policies")
    assert {p.path.name for p in engine.policies} == {"family.cedar"}


def test_family_can_forbid_child_share(family: Family, tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "no-child-share.cedar",
        (
            '@id("no-child-share")\n'
            '@reason("In our family, children do not share into the parents group.")\n'
            'forbid (principal is Halo::Member, action == Halo::Action::"share", resource)\n'
            'when { principal.role == "child" };\n'
        ),
    )
    engine = PolicyEngine(family, extra_dir=tmp_path)
    child = engine.decide("share", principal=who(family, "aarav"), resource=SCOPES["pg"], from_scope=SCOPES["dm:aarav"])
    assert not child.allowed
    assert child.policy_ids == ("no-child-share",)
    assert child.reason == "In our family, children do not share into the parents group."
    parent = engine.decide("share", principal=who(family, "wags"), resource=SCOPES["pg"], from_scope=SCOPES["dm:wags"])
    assert parent.allowed
    assert f"{path} line 1" in engine.explain(child)


# ------------------------------------------------------------------ engine behaviour


def test_rebuild_picks_up_a_new_member(family: Family) -> None:
    engine = PolicyEngine(family)
    nila = Member(id="nila", name="Nila", role="child", age_group="young_child", telegram_user_id=1006)
    dm = ScopeRef("telegram:1006", "dm", "nila")
    assert not engine.decide("converse", principal=nila, resource=dm).allowed

    grown = Family.model_validate({**FAMILY, "members": [*FAMILY["members"], nila.model_dump()]})
    engine.rebuild(grown)
    assert engine.family is grown
    decision = engine.decide("converse", principal=nila, resource=dm)
    assert decision.allowed and decision.policy_ids == ("own-dm",)
    assert engine.decide("read_transcript", principal=who(family, "mom"), resource=dm).allowed


def test_rebuild_sees_changed_visibility(family: Family) -> None:
    engine = PolicyEngine(family)
    dm = SCOPES["dm:aarav"]
    assert not engine.decide("read_transcript", principal=who(family, "wags"), resource=dm).allowed
    members = [dict(m, parental_visibility=True) if m["id"] == "aarav" else m for m in FAMILY["members"]]
    engine.rebuild(Family.model_validate({**FAMILY, "members": members}))
    assert engine.decide("read_transcript", principal=who(family, "wags"), resource=dm).allowed


def test_audit_gets_denies_and_non_converse_allows(family: Family) -> None:
    sink = Sink()
    engine = PolicyEngine(family, audit=sink)
    wags, aarav = who(family, "wags"), who(family, "aarav")

    engine.decide("converse", principal=wags, resource=SCOPES["dm:wags"])
    assert sink.events == []

    engine.decide("converse", principal=aarav, resource=SCOPES["pg"])
    engine.decide("read_transcript", principal=wags, resource=SCOPES["dm:tara"])
    engine.decide("read_transcript", principal=wags, resource=SCOPES["dm:tara"])  # memoised, still audited
    denied, allowed, again = sink.events
    assert denied == {
        "kind": "policy",
        "principal": "aarav",
        "action": "converse",
        "resource": "telegram:-1001",
        "from_scope": None,
        "allowed": False,
        "policy_ids": ["parents-group-parents-only"],
        "reason": "The parents group is for parents only; anyone else's message there is refused.",
    }
    assert allowed == {
        "kind": "policy",
        "principal": "wags",
        "action": "read_transcript",
        "resource": "telegram:1004",
        "from_scope": None,
        "allowed": True,
        "policy_ids": ["parent-reads-child-transcript"],
        "reason": "A parent may read a young child's DM transcript, or an adolescent's with parental visibility.",
    }
    assert again == allowed

    engine.decide("converse", principal=aarav, resource=SCOPES["pg"], audit=False)  # a probe: /whoami
    assert len(sink.events) == 3


def test_explain_shows_ids_reasons_and_where(engine: PolicyEngine, family: Family) -> None:
    decision = engine.decide(
        "read_memory", principal=who(family, "aarav"), resource=SCOPES["dm:wags"], from_scope=SCOPES["dm:aarav"]
    )
    text = engine.explain(decision)
    assert text.splitlines()[0] == "DENY: aarav read_memory telegram:1001 (from telegram:1003)"
    for policy_id in ("dm-memory-private", "child-reads-parent"):
        assert policy_id in text
    assert "A child never reads a parent's memory or the parents group's." in text
    assert "policy/family.cedar line " in text
    assert explain(decision) == text  # the module-level function needs only the decision

    default = engine.decide("read_memory", principal=who(family, "mom"), resource=who(family, "wags"))
    text = engine.explain(default)
    assert "no policy permits mom to read_memory member:wags" in text
    assert "default deny" in text


def test_decisions_are_memoised(family: Family, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = 0
    real = cedarpy.is_authorized

    def counting(*args: Any, **kwargs: Any) -> Any:
        nonlocal calls
        calls += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(cedarpy, "is_authorized", counting)
    engine = PolicyEngine(family)
    mom = who(family, "mom")
    ask = {"principal": mom, "resource": SCOPES["dm:tara"], "from_scope": SCOPES["pg"]}

    first = engine.decide("read_memory", **ask)
    assert calls == 2  # the decision, and "may mom converse in the parents group?"
    second = engine.decide("read_memory", **ask)
    assert second is first and calls == 2
    engine.decide("converse", principal=mom, resource=SCOPES["pg"])
    assert calls == 2  # that one was already decided on the way

    engine.decide("read_memory", **ask, context={"tool": "recall"})
    assert calls == 3  # context is part of the key

    engine.rebuild(family)
    engine.decide("read_memory", **ask)
    assert calls == 5  # rebuild forgets


def test_templates_are_refused(family: Family, tmp_path: Path) -> None:
    write(tmp_path, "extra.cedar", '@id("t")\npermit (principal == ?principal, action, resource);\n')
    with pytest.raises(PolicyError, match=r"extra\.cedar line 1: templates"):
        PolicyEngine(family, extra_dir=tmp_path)


def test_age_profile_is_an_entity_attribute_policies_enforce(tmp_path: Path) -> None:
    """A family that narrows the adolescent profile in halo.yaml gets it enforced by Cedar."""
    narrowed = Family.model_validate({**FAMILY, "safety": {"profiles": {"adolescent": {"tool_classes": ["internal"]}}}})
    engine = PolicyEngine(narrowed)
    outward = {"tool": "web_search", "tool_class": "outward"}
    denied = engine.decide("use_tool", principal=who(narrowed, "aarav"), resource=SCOPES["dm:aarav"], context=outward)
    assert not denied.allowed and denied.policy_ids == ("child-profile-tool-classes",)
    allowed = engine.decide(
        "use_tool",
        principal=who(narrowed, "aarav"),
        resource=SCOPES["dm:aarav"],
        context={"tool": "clock", "tool_class": "internal"},
    )
    assert allowed.allowed
    # a family policy can read the profile too
    (tmp_path / "short.cedar").write_text(
        '@id("short-replies-no-tools")\n@reason("Children on short replies use no tools.")\n'
        'forbid (principal is Halo::Member, action == Halo::Action::"use_tool", resource)\n'
        "when { principal has profile && principal.profile.max_reply_chars < 1000 };\n"
    )
    family_rules = PolicyEngine(narrowed, extra_dir=tmp_path)
    tara = family_rules.decide(
        "use_tool",
        principal=who(narrowed, "tara"),
        resource=SCOPES["dm:tara"],
        context={"tool": "clock", "tool_class": "internal"},
    )
    assert not tara.allowed and "short-replies-no-tools" in tara.policy_ids
    wags = family_rules.decide(
        "use_tool",
        principal=who(narrowed, "wags"),
        resource=SCOPES["dm:wags"],
        context={"tool": "clock", "tool_class": "internal"},
    )
    assert wags.allowed
