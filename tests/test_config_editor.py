"""Editing halo.yaml while halo runs: what a person wrote survives, a bad edit writes nothing."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from config.editor import append_member, edit_config
from config.loader import ConfigError, load_settings, settings_from
from config.paths import HaloPaths
from halo.core.live_family import LiveFamily
from halo.family.members import FamilyEditor, member_id_for
from halo.runtime.starter import STARTER
from policy import PolicyEngine
from tests.conftest import FAMILY_YAML

COMMENTED = (
    "# our family, edited by hand\n"
    + FAMILY_YAML.replace("owner: wags\n", "owner: wags   # the one at the laptop\n")
    + "telegram: {token: null}\n"
)


def write(home: Path, text: str) -> Path:
    home.mkdir(parents=True, exist_ok=True)
    path = home / "halo.yaml"
    path.write_text(text)
    return path


def test_appending_a_member_keeps_comments_style_and_a_backup(tmp_path: Path):
    path = write(tmp_path, COMMENTED)
    os.chmod(path, 0o600)
    paths = HaloPaths(tmp_path)
    entry = {"id": "kiran", "name": "Kiran", "role": "child", "age_group": "adolescent", "telegram_user_id": 5555}

    settings = edit_config(path, append_member(entry), lambda data: settings_from(paths, data))

    text = path.read_text()
    assert (tmp_path / "halo.yaml.bak").read_text() == COMMENTED
    assert "# our family, edited by hand" in text and "# the one at the laptop" in text
    assert "  - {id: kiran, name: Kiran, role: child, age_group: adolescent, telegram_user_id: 5555}\n" in text
    assert "token: null" in text  # nulls stay written out
    assert text.index("priya") < text.index("kiran")  # appended after the others
    assert settings.member("kiran") is not None and load_settings(tmp_path).member("kiran") is not None
    assert path.stat().st_mode & 0o777 == 0o600  # the file may hold tokens
    assert not list(tmp_path.glob(".halo.yaml.*.tmp"))


def test_block_style_members_get_a_block_style_entry(tmp_path: Path):
    starter = STARTER.format(family_name="F", owner_id="wags", owner_name="Wags")
    path = write(tmp_path, starter)
    edit_config(
        path,
        append_member({"id": "mom", "name": "Mom", "role": "parent"}),
        lambda data: settings_from(HaloPaths(tmp_path), data),
    )
    text = path.read_text()
    assert text.startswith(starter.split("members:")[0])  # the header comments, untouched
    assert "  - id: mom\n    name: Mom\n    role: parent\n" in text
    assert "telegram_chat_id: null    # a group is untrusted" in text


def test_an_edit_that_fails_validation_writes_nothing(tmp_path: Path):
    path = write(tmp_path, COMMENTED)
    clash = {"id": "kiran", "name": "Kiran", "role": "child", "telegram_user_id": 1001}  # Wags's id
    with pytest.raises(ConfigError, match="telegram_user_id"):
        edit_config(path, append_member(clash), lambda data: settings_from(HaloPaths(tmp_path), data))
    assert path.read_text() == COMMENTED
    assert not (tmp_path / "halo.yaml.bak").exists()


async def test_family_editor_rebuilds_the_policy_without_a_restart(tmp_path: Path):
    write(tmp_path, COMMENTED)
    settings = load_settings(tmp_path)
    policy = PolicyEngine(settings.family_view())
    editor = FamilyEditor(settings.paths, LiveFamily(policy))

    member = await editor.add_member(
        name="Aarav Junior", role="child", age_group=None, platform="telegram", platform_user_id="5555"
    )

    assert member.id == "aarav-junior" and member.age_group == "young_child"
    assert policy.family.by_telegram(5555) == member
    assert settings.member("aarav-junior") is None  # start-up settings stay a snapshot


def test_member_ids_are_unique_slugs():
    assert member_id_for("Aarav", {"wags"}) == "aarav"
    assert member_id_for("Aarav", {"aarav", "aarav-2"}) == "aarav-3"
    assert member_id_for("Zoë Ann", set()) == "zo-ann"
    assert member_id_for("---", set()) == "member"


def test_an_exported_halo_home_does_not_move_a_config_read_from_another_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`load_settings(home)` reads `home`'s halo.yaml and stays there, whatever HALO_HOME says
    (the suite run with a parent's HALO_HOME exported wrote into that home, issue 32)."""
    elsewhere = tmp_path / "parents-home"
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "halo.yaml").write_text(
        "family: {name: Test}\nmembers:\n  - {id: wags, name: Wags, role: parent}\nowner: wags\n", encoding="utf-8"
    )
    monkeypatch.setenv("HALO_HOME", str(elsewhere))
    settings = load_settings(mine)
    assert settings.home == mine
    assert settings.paths.config_file == mine / "halo.yaml"
    assert not elsewhere.exists()
