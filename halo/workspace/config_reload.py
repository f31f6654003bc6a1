"""halo.yaml edits take effect without a restart.

`ConfigReload` polls the file (its bytes, every `POLL_SECONDS`: dependency-free, and a
family's halo.yaml is a few kilobytes) and acts once a change has held still for one poll,
so an editor's half-written file is not taken for a broken one. `SIGHUP` and `POST /reload`
(`halo reload`) ask for the same at once. The file is read and validated exactly as at
start-up (`config.loader`, with the HALO_* environment); an invalid file changes nothing: the
running config stays, and the error, which names the key, is logged and shown in `/status`.

Every halo.yaml key is declared once, below: `LIVE` is what halo reads at each use (the family
and its policy, `home:`, routing, budgets, `llm.prices`, reminders); `RESTART` is wired into
clients, servers and schedules at start-up, and a change there is reported as needing a restart
(`restart_needed`), never half-applied. The longest declaration that matches a key decides, and
a key declared nowhere counts as needing a restart, so nothing is ever said to be applied that
is not (tests/test_config_keys.py walks every field of `Settings` through a reload).

On PostgreSQL the family's config is a versioned row (`ConfigRows`), the store of record: a
valid edit through any process (the watch, SIGHUP, `POST /reload`) is stored as the next
version before it is applied, and every poll also asks the newest version's number (the row
itself is read only when that number is new): a version this process does not run yet is
written into its halo.yaml (with this process's own `storage` and `admin` keys kept,
`config.editor.LOCAL_KEYS`), validated and applied. At start a halo.yaml edited while halo
was stopped is stored as an edit; one that is merely behind
follows the store. `version` is the version this process runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, Literal

from pydantic import BaseModel

from config.editor import family_part, replace_config, with_local_part
from config.loader import ConfigError, parse_yaml, settings_from
from config.settings import Settings
from halo.core.live_settings import LiveSettings
from halo.storage.config_rows import ConfigRows, StoredConfig
from memory.store import sha256_of

log = logging.getLogger(__name__)

POLL_SECONDS = 1.0
FOLLOW_SECONDS = 0.5  # PostgreSQL: how often the newest stored version's number is asked (one index entry)

# halo.yaml keys as they are named in the file (`home:` is Settings.home_events); `*` is any name.
# Applied live: the family through LiveFamily and the policy, `home:` through HomeEvents.apply,
# the rest through LiveSettings' readers.
LIVE = (
    "family",
    "members",
    "owner",
    "parents_group",
    "family_group",
    "work",
    "safety",
    "home",
    "routing",
    "budget",
    "llm.prices",
    "reminders",
)
# needing a restart: each is wired into a client, a server or a schedule at start-up
RESTART = (
    "llm",
    "telegram",
    "discord",
    "mqtt",
    "admin",
    "memory",
    "sessions",
    "backups",
    "tools",
    "storage",
    "family.name",  # unless storage.family_id is set, the id halo.db's rows carry (set at start)
    "work.digest",  # its schedule is set at start-up; the channels are live
    "safety.profiles.*.model",  # built at start-up
)
_FIELDS = {"home": "home_events"}  # a file key whose Settings field is named otherwise
_NOT_IN_FILE = ("home",)  # Settings.home is HALO_HOME itself, never read from halo.yaml

Trigger = Literal["start", "watch", "signal", "api", "store"]
Apply = Callable[[Settings], Awaitable[None]]


class ConfigReload:
    """Reads and validates halo.yaml and hands a good one to `apply`, which takes its live keys
    and `live` takes its live keys (`live_part`). `started` is what halo started with: what the
    restart keys still are."""

    def __init__(
        self, live: LiveSettings, apply: Apply, *, poll_seconds: float = POLL_SECONDS, record: ConfigRows | None = None
    ) -> None:
        self.live = live  # what runs now: the start-up settings with the live keys reloaded
        self.started = started = live.current()
        self.apply = apply
        self.path = started.paths.config_file
        self.poll_seconds = poll_seconds
        self.applied_digest = self._digest()
        self.reloads = 0
        self.last_trigger: Trigger | None = None
        self.last_applied_at: float | None = None
        self.error: str | None = None
        self.restart_needed: list[str] = []
        self.record = record  # PostgreSQL: the family's versions; None on the embedded store
        self.version: int | None = None  # the stored version this process runs
        self._refused_version: int | None = None  # a stored version invalid here: said once
        self._seen = self.applied_digest
        self._lock = asyncio.Lock()
        self._task: asyncio.Task[None] | None = None
        self._asked: set[asyncio.Task[Any]] = set()

    @property
    def current(self) -> Settings:
        return self.live.current()

    def _digest(self) -> str | None:
        try:
            return hashlib.sha256(self.path.read_bytes()).hexdigest()
        except OSError:
            return None

    # --- lifecycle -------------------------------------------------------------------

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._watch(), name="config-reload")

    async def close(self) -> None:
        for task in [self._task, *self._asked]:
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        self._task = None

    async def _watch(self) -> None:
        joined = self.record is None
        # PostgreSQL: the file too at the follow's pace, so an edit is stored (and run by every
        # process) within about a second and a half, not two polls of a second and the follow
        tick = self.poll_seconds if self.record is None else min(self.poll_seconds, FOLLOW_SECONDS)
        while True:
            try:
                if not joined:
                    await self.join()
                    joined = True
                await self.poll_file()
                if self.record is not None:
                    await self.follow()
            except Exception:
                log.exception("watching halo.yaml failed; trying again shortly")
            await asyncio.sleep(tick)

    async def poll(self) -> None:
        """The file, then (PostgreSQL) the stored versions: one turn of the watch."""
        await self.poll_file()
        if self.record is not None:
            await self.follow()

    async def poll_file(self) -> None:
        """Reload when the file changed since it was last applied and held still for one poll."""
        digest = self._digest()
        settled = digest == self._seen
        self._seen = digest
        if settled and digest != self.applied_digest:
            await self.reload("watch")

    async def join(self) -> None:
        """At start (PostgreSQL): the first process stores its halo.yaml as version 1; a file
        edited while halo was stopped (a text no version has) is stored as an edit; a file that
        is merely behind follows the newest version. What halo started with runs already: a
        file stored here is not applied again."""
        assert self.record is not None
        try:
            mine = family_part(await asyncio.to_thread(self._text), self.path)
        except ConfigError:
            return  # changed since start and unreadable: the watch refuses it, and says so
        newest = await self.record.newest()
        if newest is None or (
            newest.sha256 != sha256_of(mine) and await self.record.version_of(sha256_of(mine)) is None
        ):
            async with self._lock:
                self.version = (await self.record.add(mine)).version
        else:
            await self.follow()

    async def follow(self) -> None:
        """Run the newest stored version, when it is not the one this process runs."""
        assert self.record is not None
        number = await self.record.newest_version()  # the number alone: the text only when it is new
        if number is None or number in (self.version, self._refused_version):
            return
        newest = await self.record.newest()
        if newest is None or newest.version in (self.version, self._refused_version):
            return
        async with self._lock:
            local = await asyncio.to_thread(self._text)
            try:
                if family_part(local, self.path) == newest.text:
                    self.version = newest.version  # the file says it already (this process stored it)
                    return
                text = with_local_part(newest.text, local, self.path)
                new = self._same_family(self._validated(text))
            except ConfigError as exc:  # the stored version, or this file's own keys, do not read
                self._refused_version = newest.version
                self.error = f"version {newest.version} of the family's halo.yaml is not valid here: {exc}"
                log.error("%s; the running config is kept", self.error)
                return
            await asyncio.to_thread(replace_config, self.path, text)
            await self._applied(new, self._digest(), "store", newest)

    def ask(self, trigger: Trigger = "signal") -> None:
        """Reload soon, from a signal handler (which cannot await)."""
        task = asyncio.get_running_loop().create_task(self.reload(trigger), name="config-reload-asked")
        self._asked.add(task)
        task.add_done_callback(self._asked.discard)

    # --- reloading -------------------------------------------------------------------

    async def reload(self, trigger: Trigger) -> bool:
        """Read, validate and apply halo.yaml now (on PostgreSQL: stored first, as the next
        version). False (and `error` set, the running config kept) when it is invalid. Never
        raises for a bad file."""
        async with self._lock:
            digest = self._digest()
            self.last_trigger = trigger
            try:
                if digest is None:
                    raise ConfigError(f"{self.path}: cannot be read (moved or deleted?)")
                text = await asyncio.to_thread(self._text)
                new = self._same_family(self._validated(text))
            except ConfigError as exc:
                self._refused(str(exc), digest)
                return False
            except OSError as exc:  # unreadable now (permissions, a vanished mount)
                self._refused(f"{self.path}: cannot be read: {exc.strerror or exc}", digest)
                return False
            stored = None
            if self.record is not None:
                try:
                    stored = await self.record.add(family_part(text, self.path))
                except Exception as exc:  # the store of record refused it: no process runs it, nor this one
                    log.exception("storing halo.yaml failed")
                    self._refused(f"{self.path}: could not be stored: {type(exc).__name__}: {exc}", digest)
                    return False
            return await self._applied(new, digest, trigger, stored)

    async def _applied(self, new: Settings, digest: str | None, trigger: Trigger, stored: StoredConfig | None) -> bool:
        """Hand a valid config to `apply` (under the lock); False when a part refused it."""
        try:
            await self.apply(new)
            self.live.replace(live_part(self.started, new))
        except Exception as exc:  # a part refused it: say so, keep what runs
            log.exception("applying halo.yaml failed")
            self._refused(f"{self.path}: could not be applied: {type(exc).__name__}: {exc}", digest)
            return False
        self.restart_needed = restart_needed(self.started, new)
        self.applied_digest = self._seen = digest
        self.error = None
        self.reloads += 1
        self.last_trigger = trigger
        self.last_applied_at = time.time()
        if stored is not None:
            self.version = stored.version
        if self.restart_needed:
            log.warning("halo.yaml applied; restart halo for: %s", ", ".join(self.restart_needed))
        else:
            log.info("halo.yaml applied (%s%s)", trigger, f", version {self.version}" if stored else "")
        return True

    def _same_family(self, new: Settings) -> Settings:
        """On PostgreSQL the family id picks the rows halo sees: an edit that changes it (a new
        `family.name` without `storage.family_id`) would hide every row after a restart."""
        if self.record is not None and new.family_id != self.started.family_id:
            raise ConfigError(
                f"{self.path}: this edit changes the family id every stored row carries ({self.started.family_id} "
                f"→ {new.family_id}); keep it with storage.family_id: {self.started.family_id}"
            )
        return new

    def _text(self) -> str:
        return self.path.read_text(encoding="utf-8") if self.path.exists() else ""

    def _validated(self, text: str) -> Settings:
        """The settings `text` makes, read exactly as at start-up (with the HALO_* environment)."""
        return settings_from(self.started.paths, parse_yaml(text, self.path))

    def _refused(self, error: str, digest: str | None) -> None:
        self.error = error
        self.applied_digest = self._seen = digest  # said once; the next edit is looked at again
        log.error("halo.yaml was not applied, the running config is kept:\n%s", error)

    def status(self) -> dict[str, Any]:
        return {
            "file": str(self.path),
            "version": self.version,
            "watching": self._task is not None and not self._task.done(),
            "reloads": self.reloads,
            "last_trigger": self.last_trigger,
            "last_applied_at": self.last_applied_at,
            "error": self.error,
            "restart_needed": list(self.restart_needed),
            "live": list(LIVE),
            "needs_restart": list(RESTART),
        }


def declared(key: str) -> Literal["live", "restart"] | None:
    """Whether a halo.yaml key (dotted, `safety.profiles.child.model`) applies live or needs a
    restart: the longest declaration it falls under decides. None: declared nowhere."""
    live, restart = _longest(key, LIVE), _longest(key, RESTART)
    if live is None and restart is None:
        return None
    return "restart" if live is None or (restart is not None and restart.count(".") > live.count(".")) else "live"


def _longest(key: str, declarations: tuple[str, ...]) -> str | None:
    """The longest of `declarations` that `key` falls under."""
    parts = key.split(".")
    found = [
        d
        for d in declarations
        if len(d.split(".")) <= len(parts) and all(p in ("*", k) for p, k in zip(d.split("."), parts, strict=False))
    ]
    return max(found, key=lambda d: d.count("."), default=None)


def file_dump(settings: Settings) -> dict[str, Any]:
    """The settings as halo.yaml names them (secrets stay SecretStr, which compare by value)."""
    dumped = {key: getattr(settings, key) for key in type(settings).model_fields if key not in _NOT_IN_FILE}
    for file_key, field in _FIELDS.items():
        dumped[file_key] = dumped.pop(field)
    return dumped


def changed_keys(old: Any, new: Any, prefix: str = "") -> list[str]:
    """The dotted keys whose values differ, down to the leaves (a list is one value)."""
    if isinstance(old, BaseModel) or isinstance(new, BaseModel):  # a new or dropped entry (a profile)
        old, new = dict(old or {}), dict(new or {})
    if isinstance(old, dict) and isinstance(new, dict):
        found = []
        for key in [*old, *(k for k in new if k not in old)]:
            found += changed_keys(old.get(key), new.get(key), f"{prefix}{key}.")
        return found
    return [] if old == new else [prefix.rstrip(".")]


def live_part(started: Settings, new: Settings) -> Settings:
    """What runs after a reload: the start-up settings with `new`'s live keys."""
    merged = started
    for key in LIVE:
        path = key.split(".")
        path[0] = _FIELDS.get(path[0], path[0])
        merged = _with(merged, path, _at(new, path))
    return merged


def _at(model: Any, path: list[str]) -> Any:
    for name in path:
        model = getattr(model, name)
    return model


def _with(model: Any, path: list[str], value: Any) -> Any:
    """`model` (frozen) with the value at `path` replaced."""
    head, rest = path[0], path[1:]
    return model.model_copy(update={head: _with(getattr(model, head), rest, value) if rest else value})


def restart_needed(started: Settings, new: Settings) -> list[str]:
    """The keys whose value differs from what halo started with and that only a restart applies."""
    needed: list[str] = []
    for key in changed_keys(file_dump(started), file_dump(new)):
        if declared(key) != "live" and (name := _longest(key, RESTART) or key) not in needed:
            needed.append(name)
    return needed


def ask_running_halo(settings: Settings, timeout: float = 30.0, *, path: str = "/reload") -> tuple[int, dict[str, Any]]:
    """`halo reload`: POST /reload (or `path`) to the halo serving this HALO_HOME; (HTTP status, JSON body).

    The credential is admin.token when set; otherwise a one-time login link minted in
    HALO_HOME (as `halo dashboard` does) is redeemed for a session: whoever may write
    HALO_HOME may reload it. Raises OSError when nothing listens there."""
    import http.client
    import json

    from halo.web_auth import SESSION_COOKIE, DashboardLogin

    host = settings.admin.host if settings.admin.host not in ("0.0.0.0", "::", "") else "127.0.0.1"
    headers = {"Content-Type": "application/json"}
    if settings.admin.token is not None:
        headers["Authorization"] = f"Bearer {settings.admin.token.get_secret_value()}"
    else:
        token = DashboardLogin(settings.paths.logins).issue_link_token()
        login = http.client.HTTPConnection(host, settings.admin.port, timeout=timeout)
        try:
            login.request("GET", f"/login?token={token}")
            response = login.getresponse()
            response.read()
            cookie = response.getheader("Set-Cookie") or ""
        finally:
            login.close()
        session = next((p.split("=", 1)[1] for p in cookie.split(";") if p.strip().startswith(SESSION_COOKIE)), None)
        if session is None:
            return response.status, {"error": "the running halo did not accept a login link from this HALO_HOME"}
        headers["Cookie"] = f"{SESSION_COOKIE}={session}"
    connection = http.client.HTTPConnection(host, settings.admin.port, timeout=timeout)
    try:
        connection.request("POST", path, headers=headers)  # no body: the routes asked take none
        response = connection.getresponse()
        raw = response.read()
    finally:
        connection.close()
    try:
        body = json.loads(raw)
    except ValueError:
        body = {"error": raw.decode("utf-8", "replace")[:300]}
    return response.status, body if isinstance(body, dict) else {"error": str(body)}
