"""The settings halo runs on right now, one object every live part reads them from.

halo.yaml is edited while halo runs. What a part reads at each use (routing, budget, model
prices, reminders) is handed one of `LiveSettings`' readers and calls it each time, so a
reload (`halo/workspace/config_reload.py`) that `replace`s the settings reaches every such part
at once, with no copy left behind that still holds the old value. What is wired into a client,
a server or a schedule at start-up is not read from here: a change to it needs a restart.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Mapping

    from config.settings import BudgetSettings, ModelPrice, ReminderSettings, RoutingSettings, Settings


class LiveSettings:
    """The current `Settings`: read a live section with its reader, swap them with `replace`."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings

    def current(self) -> Settings:
        return self._settings

    def replace(self, settings: Settings) -> None:
        """Run on `settings` from now on (the start-up settings with a reload's live keys)."""
        self._settings = settings

    def routing(self) -> RoutingSettings:
        return self._settings.routing

    def budget(self) -> BudgetSettings:
        return self._settings.budget

    def prices(self) -> Mapping[str, ModelPrice]:
        return self._settings.llm.prices

    def reminders(self) -> ReminderSettings:
        return self._settings.reminders
