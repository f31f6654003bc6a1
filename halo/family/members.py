"""Adding a family member while halo runs.

halo.yaml stays the one source of the family: a new member is written there first
(validated, atomically, previous file kept as halo.yaml.bak, comments kept), and the
live family (halo/core/live_family.py) is then replaced with the validated result, so
every part, the policy engine first, sees the new member on its next message; the start-up
`Settings` stay what they were for everything else (model, ports, tokens).
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

from config.editor import append_member, edit_config
from config.family import AgeGroup, Member, Role
from config.loader import settings_from
from config.paths import HaloPaths
from config.settings import Settings
from halo.core.live_family import LiveFamily

# The member field that links a person to their account on each platform.
PLATFORM_ID_FIELDS = {"telegram": "telegram_user_id", "discord": "discord_user_id"}


def member_id_for(name: str, taken: set[str]) -> str:
    """A slug for `name` that no member uses yet: `aarav`, then `aarav-2` …"""
    base = re.sub(r"[^a-z0-9_-]+", "-", name.lower()).strip("-_")[:28] or "member"
    if not base[0].isalnum():
        base = f"m{base}"
    candidate, n = base, 2
    while candidate in taken:
        candidate, n = f"{base}-{n}", n + 1
    return candidate


class FamilyEditor:
    def __init__(self, paths: HaloPaths, family: LiveFamily) -> None:
        self.paths = paths
        self.family = family
        self._lock = asyncio.Lock()

    async def add_member(
        self, *, name: str, role: Role, age_group: AgeGroup | None, platform: str, platform_user_id: str
    ) -> Member:
        """Write the member to halo.yaml and take them into account now. Raises ConfigError
        (nothing written) when the result would not be a valid config."""
        field = PLATFORM_ID_FIELDS.get(platform)
        if field is None:
            raise ValueError(f"members cannot be linked to {platform} accounts")
        async with self._lock:
            member_id = member_id_for(name, {m.id for m in self.family.current().members})
            entry: dict[str, Any] = {"id": member_id, "name": name, "role": role}
            if role == "child":
                entry["age_group"] = age_group or "young_child"
            entry[field] = int(platform_user_id)
            settings: Settings = await asyncio.to_thread(
                edit_config,
                self.paths.config_file,
                append_member(entry),
                lambda data: settings_from(self.paths, data),
            )
            family = settings.family_view()
            self.family.replace(family)
        member = family.member(member_id)
        assert member is not None  # it was just validated as part of the family
        return member
