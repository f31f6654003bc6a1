"""Who is calling over HTTP, by credential: the admin token, a member's own web_token, or the
dashboard's session cookie. Where the call comes from never makes up for a missing credential
(a family computer is shared: being on it is not being a parent).

The cookie comes from a one-time login link, as Jupyter does it. `halo serve` prints one at
start and `halo dashboard` prints a fresh one: both write a file named by the sha256 of a
random token into `HALO_HOME/logins/` (0600, in a 0700 folder). The server redeems a link by
deleting that file, so a link works once even with two tabs racing, and only someone who can
write HALO_HOME (who could read `admin.token` from halo.yaml anyway) can mint one. No second
channel to the running server is needed.

A session is a row in halo.db (`web_sessions`: only the sha256 of the cookie, never the cookie),
so a browser stays signed in across restarts and on every process of a family. It lasts
SESSION_SECONDS and ends at once when its browser signs out. Credentials are checked
synchronously, so the server's middleware (`SessionRows.check`) reads the row first; a process
keeps what it read for RECHECK_SECONDS, which bounds how long another process may still honour
a session signed out elsewhere.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import time
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

from aiohttp import web
from sqlalchemy import Column, Float, MetaData, String, Table, delete, select
from yarl import URL

from config.family import Family, Member
from halo.access import bearer_token, token_matches
from halo.db_conn import Conn

if TYPE_CHECKING:
    from config.settings import Settings

SESSION_COOKIE = "halo_session"
LINK_SECONDS = 15 * 60
SESSION_SECONDS = 14 * 24 * 3600  # a family computer's browser stays signed in for two weeks
RECHECK_SECONDS = 30.0
_TOKEN_BYTES = 32

metadata = MetaData()
sessions_table = Table(
    "web_sessions",
    metadata,
    Column("digest", String(64), primary_key=True),  # sha256 of the cookie: the cookie is never stored
    Column("created", Float, nullable=False),
    Column("expires", Float, nullable=False),
    Column("member_id", String(64)),  # the web chat's sign-in with a web_token: that member; None: the dashboard's
)


class SessionTables(Protocol):
    """halo.db as `HaloDB` offers it (halo.storage sits above this module)."""

    def write(self, metadata: MetaData) -> AbstractAsyncContextManager[Conn]: ...

    def read(self, metadata: MetaData) -> AbstractAsyncContextManager[Conn]: ...


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "replace")).hexdigest()


class DashboardLogin:
    """One-time login links (files under `folder`) exchanged for session cookies, kept in halo.db
    (`db`) when given, else in this process's memory only (`halo dashboard` minting a link)."""

    def __init__(self, folder: Path, db: SessionTables | None = None, *, now: Callable[[], float] = time.time) -> None:
        self.folder = folder
        self.db = db
        self._now = now
        self._sessions: dict[str, tuple[float, float, str | None]] = {}  # sha256 → (expiry, when read, member)

    def issue_link_token(self, *, at_serve_start: bool = False) -> str:
        """A fresh single-use token; its file says when it expires. Expired links go first, and a
        link `halo serve` prints at start replaces the ones earlier starts printed: their process
        is gone, and otherwise each start would leave one more file behind."""
        self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        self._prune_links(serve_links_too=at_serve_start)
        token = secrets.token_urlsafe(_TOKEN_BYTES)
        fd = os.open(self.folder / _digest(token), os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(f"{self._now() + LINK_SECONDS:.0f}\n{_SERVE if at_serve_start else _ASKED}\n")
        return token

    async def redeem(self, token: str) -> str | None:
        """The session cookie value for a valid, unused, unexpired link token (stored); else None."""
        if not token or len(token) > 256:
            return None
        path = self.folder / _digest(token)
        try:
            expires, _ = _read_link(path)
            path.unlink()  # whoever unlinks it first is the one who used it
        except (OSError, ValueError):
            return None
        now = self._now()
        if expires < now:
            return None
        return await self.start_session()

    async def start_session(self, member_id: str | None = None) -> str:
        """A new session cookie value, stored: the dashboard's (None), or the web chat's for the
        member whose web_token was just checked."""
        now = self._now()
        session = secrets.token_urlsafe(_TOKEN_BYTES)
        digest, until = _digest(session), now + SESSION_SECONDS
        if self.db is not None:
            async with self.db.write(metadata) as conn:
                await conn.execute(delete(sessions_table).where(sessions_table.c.expires < now))
                await conn.execute(
                    sessions_table.insert().values(digest=digest, created=now, expires=until, member_id=member_id)
                )
        self._sessions[digest] = (until, now, member_id)
        return session

    async def check(self, session: str | None) -> None:
        """Read the session's row when this process has not lately (after a restart, or one another
        process made), so `session_valid` answers from it."""
        if not session or len(session) > 256 or self.db is None:
            return
        digest, now = _digest(session), self._now()
        known = self._sessions.get(digest)
        if known is not None and now - known[1] < RECHECK_SECONDS:
            return
        async with self.db.read(metadata) as conn:
            columns = select(sessions_table.c.expires, sessions_table.c.member_id)
            row = (await conn.execute(columns.where(sessions_table.c.digest == digest))).first()
        if row is None:
            self._sessions.pop(digest, None)
        else:
            self._sessions[digest] = (float(row.expires), now, row.member_id)

    def session_valid(self, session: str | None) -> bool:
        return self.session_of(session) is not None

    def session_of(self, session: str | None) -> tuple[str | None] | None:
        """(member id or None for the dashboard's) for a live session; None when there is none."""
        if not session:
            return None
        known = self._sessions.get(_digest(session))
        if known is None:
            return None
        if known[0] < self._now():
            self._sessions.pop(_digest(session), None)
            return None
        return (known[2],)

    async def end_session(self, session: str | None) -> None:
        """Sign this browser out, here and (once they next read it) on every other process."""
        if not session or len(session) > 256:
            return
        digest = _digest(session)
        self._sessions.pop(digest, None)
        if self.db is not None:
            async with self.db.write(metadata) as conn:
                await conn.execute(delete(sessions_table).where(sessions_table.c.digest == digest))

    def _prune_links(self, *, serve_links_too: bool) -> None:
        now = self._now()
        for path in self.folder.glob("*"):
            try:
                expires, kind = _read_link(path)
            except (OSError, ValueError):  # e.g. one another process is writing right now
                continue
            if expires < now or (serve_links_too and kind == _SERVE):
                path.unlink(missing_ok=True)


_SERVE, _ASKED = "serve", "dashboard"  # who printed a link: `halo serve` at start, or `halo dashboard`


def _read_link(path: Path) -> tuple[float, str]:
    """A link file's expiry and who printed it (files from before the second line: `halo dashboard`)."""
    first, _, rest = path.read_text().partition("\n")
    return float(first), rest.strip() or _ASKED


WEB_AUTH = web.AppKey("web_auth", DashboardLogin)


def login_url(base: str, token: str) -> str:
    return f"{base.rstrip('/')}/login?token={token}"


def dashboard_link(settings: Settings, bound: tuple[Any, ...] | None = None) -> str:
    """A fresh one-time login link to the dashboard of the halo `settings` describe. `bound`,
    the address it listens on, is given by `halo serve` at start; that link replaces the ones
    earlier starts printed."""
    host, port = (str(bound[0]), bound[1]) if bound else (settings.admin.host, settings.admin.port)
    if host in ("0.0.0.0", "::", ""):
        host = "127.0.0.1"
    netloc = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    token = DashboardLogin(settings.paths.logins).issue_link_token(at_serve_start=bound is not None)
    return login_url(f"http://{netloc}", token)


CallerKind = Literal["admin_token", "dashboard", "member"]


@dataclass(frozen=True, slots=True)
class Caller:
    """A credential that checked out. `member` is set for a web_token (that member)."""

    kind: CallerKind
    member: Member | None = None

    @property
    def is_parent_credential(self) -> bool:
        """What opens an admin route: the admin token, the dashboard cookie, a parent's web_token."""
        return self.kind != "member" or (self.member is not None and self.member.role == "parent")

    @property
    def name(self) -> str:
        """Who did it, for the audit log (never the credential itself)."""
        if self.kind == "admin_token":
            return "admin:token"
        if self.kind == "dashboard":
            return "admin:dashboard"
        member = self.member
        assert member is not None
        return f"{'parent' if member.role == 'parent' else 'member'}:{member.id}"


def _cross_site(request: web.BaseRequest) -> bool:
    """A browser request another site's page made (belt and braces to SameSite=Strict)."""
    if request.headers.get("Sec-Fetch-Site", "same-origin") not in ("same-origin", "none"):
        return True
    origin, host = request.headers.get("Origin"), request.headers.get("Host")
    if origin is None:
        return False
    try:
        parsed = URL(origin)
        served = URL(f"{parsed.scheme or 'http'}://{host}") if host else None
    except ValueError:
        return True
    return served is None or (parsed.host, parsed.port) != (served.host, served.port)


def caller_of(request: web.BaseRequest, family: Family, admin_token: str | None) -> Caller | None:
    """The credential on a request, checked in constant time; None when there is none that holds.
    A Bearer token that is neither the admin token nor a web_token is no credential, even with
    a valid cookie beside it (the client said who it is, and it was wrong)."""
    token = bearer_token(request)
    if token is not None:
        if token_matches(token, admin_token):
            return Caller("admin_token")
        member = family.by_web_token(token)
        return Caller("member", member) if member is not None else None
    login = request.app.get(WEB_AUTH) if isinstance(request, web.Request) else None
    cookie = request.cookies.get(SESSION_COOKIE)
    if login is None or not cookie or _cross_site(request) or (found := login.session_of(cookie)) is None:
        return None
    if found[0] is None:
        return Caller("dashboard")
    member = family.member(found[0])  # a member removed from halo.yaml since is no one
    return Caller("member", member) if member is not None else None


def member_of(request: web.BaseRequest, family: Family, admin_token: str | None) -> Member | None:
    """Whom a member route (the web chat, /family/*) speaks for: a web_token's member, or for the
    dashboard's signed-in parent the local owner. The admin token is nobody's."""
    caller = caller_of(request, family, admin_token)
    if caller is None or caller.kind == "admin_token":
        return None
    return caller.member if caller.kind == "member" else family.local_owner
