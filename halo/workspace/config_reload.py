"""halo.yaml edits take effect without a restart.

`ConfigReload` polls the file (its bytes, every `POLL_SECONDS`: dependency-free, and a
family's halo.yaml is a few kilobytes) and acts once a change has held still for one poll,
so an editor's half-written file is not taken for a broken one. `SIGHUP` and `POST /reload`
(`halo reload`) ask for the same at once. The file is read and validated exactly as at
start-up (`config.loader`, with the HALO_* environment); an invalid file changes nothing: the
running config stays, and the error, which names the key, is logged and shown in `/status`.

What is applied live (`LIVE_KEYS`) is what halo reads from the family at each use: members and
their tokens, the owner, the groups, the work channels, the safety settings (but not a
profile's model), the family's time zone, and the `home:` section (rules, quiet hours). The
rest is wired into clients, servers and schedules at start-up; a change there is reported as
needing a restart (`restart_needed`), never half-applied.

On PostgreSQL the family's config is a versioned row (`ConfigRows`), the store of record: a
valid edit through any process (the watch, SIGHUP, `POST /reload`) is stored as the next
version before it is applied, and every poll also looks at the newest version: one this
process does not run yet is written into its halo.yaml (with this process's own `storage`
and `admin` keys kept, `config.editor.LOCAL_KEYS`), validated and applied. At start a
halo.yaml edited while halo was stopped is stored as an edit; one that is merely behind
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

from config.editor import family_part, replace_config, with_local_part
from config.loader import ConfigError, parse_yaml, settings_from
from config.settings import Settings
from halo.storage.config_rows import ConfigRows, StoredConfig, sha256_of

log = logging.getLogger(__name__)

POLL_SECONDS = 1.0
FOLLOW_SECONDS = 0.5  # PostgreSQL: how often the newest stored version is looked at (one indexed row)

# halo.yaml keys applied live, as they are named in the file (`home:` is Settings.home_events)
LIVE_KEYS = ("family", "members", "owner", "parents_group", "family_group", "work", "safety", "home")
_LIVE_FIELDS = {"home": "home_events"}
# keys that need a restart: each is wired into a client, a server or a schedule at start-up
RESTART_KEYS = ("llm", "telegram", "discord", "mqtt", "admin", "memory", "sessions", "backups", "tools")
RESTART_SUBKEYS = (("work", "digest"),)  # its schedule is set at start-up; the channels are live

Trigger = Literal["start", "watch", "signal", "api", "store"]
Apply = Callable[[Settings], Awaitable[None]]


class ConfigReload:
    """Reads and validates halo.yaml and hands a good one to `apply`, which takes its live keys
    (`live_part`). `started` is what halo started with: what the restart keys still are."""

    def __init__(
        self, started: Settings, apply: Apply, *, poll_seconds: float = POLL_SECONDS, record: ConfigRows | None = None
    ) -> None:
        self.started = started
        self.current = started  # what runs now: the start-up settings with the live keys reloaded
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
        tick = self.poll_seconds if self.record is None else min(self.poll_seconds, FOLLOW_SECONDS)
        file_due = 0.0
        while True:
            try:
                if not joined:
                    await self.join()
                    joined = True
                if time.monotonic() >= file_due:
                    file_due = time.monotonic() + self.poll_seconds
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
        except Exception as exc:  # a part refused it: say so, keep what runs
            log.exception("applying halo.yaml failed")
            self._refused(f"{self.path}: could not be applied: {type(exc).__name__}: {exc}", digest)
            return False
        self.current = self.current.model_copy(update=live_part(new))
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
            "live": list(LIVE_KEYS),
            "needs_restart": [*RESTART_KEYS, *(".".join(k) for k in RESTART_SUBKEYS), "safety.profiles.*.model"],
        }


def live_part(new: Settings) -> dict[str, Any]:
    """The settings fields a reload replaces (the live keys)."""
    return {_LIVE_FIELDS.get(key, key): getattr(new, _LIVE_FIELDS.get(key, key)) for key in LIVE_KEYS}


def restart_needed(started: Settings, new: Settings) -> list[str]:
    """The keys whose value differs from what halo started with and that only a restart applies."""
    changed = [key for key in RESTART_KEYS if getattr(started, key) != getattr(new, key)]
    for section, key in RESTART_SUBKEYS:
        if getattr(getattr(started, section), key) != getattr(getattr(new, section), key):
            changed.append(f"{section}.{key}")
    if _profile_models(started) != _profile_models(new):
        changed.append("safety.profiles.*.model")
    return changed


def _profile_models(settings: Settings) -> dict[str, str | None]:
    """The age profiles' model choices: those models are built at start-up."""
    return {name: profile.model for name, profile in settings.safety.profiles.items()}


def ask_running_halo(settings: Settings, timeout: float = 30.0) -> tuple[int, dict[str, Any]]:
    """`halo reload`: POST /reload to the halo serving this HALO_HOME; (HTTP status, JSON body).

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
        connection.request("POST", "/reload", headers=headers)  # no body: the route takes none
        response = connection.getresponse()
        raw = response.read()
    finally:
        connection.close()
    try:
        body = json.loads(raw)
    except ValueError:
        body = {"error": raw.decode("utf-8", "replace")[:300]}
    return response.status, body if isinstance(body, dict) else {"error": str(body)}
