"""`halo doctor`: check each part a family depends on and say what to fix."""

from __future__ import annotations

import argparse
import asyncio
import logging
from dataclasses import dataclass

import aiohttp

from config.loader import ConfigError, load_settings
from config.paths import default_home
from config.settings import Settings

TIMEOUT = aiohttp.ClientTimeout(total=5)


@dataclass(frozen=True, slots=True)
class Check:
    """One part's state. `warn`: it works, but less than it could (the exit code stays 0)."""

    name: str
    ok: bool
    detail: str
    fix: str = ""
    warn: bool = False

    @property
    def mark(self) -> str:
        return "✗" if not self.ok else "!" if self.warn else "✓"


async def _get(url: str, headers: dict[str, str] | None = None) -> tuple[int, str]:
    async with aiohttp.ClientSession(timeout=TIMEOUT) as http, http.get(url, headers=headers) as resp:
        return resp.status, (await resp.text())[:200]


KEY_VARIABLES = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}


async def check_model(settings: Settings) -> Check:
    llm = settings.llm
    if llm.provider == "none":
        return Check(
            "model",
            True,
            "no model configured: commands work, free text gets a how-to reply",
            "set llm.provider (openai, openai-compatible, anthropic) in halo.yaml to talk freely",
        )
    key = llm.resolved_api_key()
    if key is None and llm.provider in KEY_VARIABLES:  # a hosted provider: nothing to ask without a key
        return Check(
            "model",
            False,
            f"no API key for {llm.provider}",
            f"set llm.api_key in halo.yaml, or HALO_LLM__API_KEY or {KEY_VARIABLES[llm.provider]} in the environment",
        )
    if llm.provider == "anthropic":
        base = (llm.base_url or "https://api.anthropic.com").rstrip("/")
        url, headers = f"{base}/v1/models", {"x-api-key": key or "", "anthropic-version": "2023-06-01"}
    else:
        base = (llm.base_url or "https://api.openai.com/v1").rstrip("/")
        url, headers = f"{base}/models", {"Authorization": f"Bearer {key or 'none'}"}
    try:
        status, body = await _get(url, headers)
    except (aiohttp.ClientError, TimeoutError) as exc:
        return Check(
            "model",
            False,
            f"{llm.provider} at {base} is unreachable: {exc or type(exc).__name__}",
            "check llm.base_url and that the server is running",
        )
    if status in (401, 403):
        return Check("model", False, f"{llm.provider} refused the API key ({status})", "check llm.api_key")
    if status >= 400:
        return Check("model", False, f"{llm.provider} answered {status}: {body}", "check llm.base_url")
    return Check("model", True, f"{llm.provider} reachable at {base}, model {llm.model}")


async def check_telegram(settings: Settings) -> Check | None:
    token = settings.telegram.token
    if token is None:
        return None
    base = (settings.telegram.base_url or "https://api.telegram.org/bot").rstrip("/")
    try:
        status, _ = await _get(f"{base}{token.get_secret_value()}/getMe")
    except (aiohttp.ClientError, TimeoutError) as exc:
        return Check(
            "telegram",
            False,
            f"Bot API unreachable: {exc or type(exc).__name__}",
            "check the network or telegram.base_url",
        )
    if status != 200:
        return Check("telegram", False, f"Bot API answered {status}", "check telegram.token (from @BotFather)")
    return Check("telegram", True, "bot token accepted")


async def check_discord(settings: Settings) -> Check | None:
    token = settings.discord.token
    if token is None:
        return None
    base = (settings.discord.api_base_url or "https://discord.com/api/v10").rstrip("/")
    try:
        status, _ = await _get(f"{base}/users/@me", {"Authorization": f"Bot {token.get_secret_value()}"})
    except (aiohttp.ClientError, TimeoutError) as exc:
        return Check(
            "discord",
            False,
            f"Discord API unreachable: {exc or type(exc).__name__}",
            "check the network or discord.api_base_url",
        )
    if status in (401, 403):
        return Check(
            "discord",
            False,
            f"Discord refused the bot token ({status})",
            "check discord.token (the Bot page of your application in the Discord developer portal)",
        )
    if status != 200:
        return Check(
            "discord", False, f"Discord API answered {status}", "try again later, or check discord.api_base_url"
        )
    return Check("discord", True, "bot token accepted")


async def check_mqtt(settings: Settings) -> Check | None:
    """Connect and subscribe the way halo does, under a client id of the doctor's own (halo's
    fixed id would take over halo's persistent session)."""
    if not settings.mqtt.host:
        return None
    from adapters.mqtt.doctor import probe

    return Check("mqtt", *await probe(settings.mqtt))


async def _healthz(host: str, port: int) -> dict[str, object] | None:
    """What a server on the port says at /healthz, or None when nothing there answers it."""
    try:
        async with (
            aiohttp.ClientSession(timeout=TIMEOUT) as http,
            http.get(f"http://{host}:{port}/healthz") as resp,
        ):
            if resp.status != 200:
                return None
            body = await resp.json(content_type=None)
    except (aiohttp.ClientError, TimeoutError, ValueError):
        return None
    return body if isinstance(body, dict) else None


async def serving_this_home(settings: Settings) -> bool:
    """Does a halo serving this HALO_HOME answer on the admin port now?"""
    from admin_api.starting import home_fingerprint

    health = await _healthz(settings.admin.host, settings.admin.port)
    return health is not None and health.get("home") == home_fingerprint(settings.paths.home)


async def check_admin_port(settings: Settings) -> Check:
    from admin_api.starting import home_fingerprint

    host, port = settings.admin.host, settings.admin.port
    health = await _healthz(host, port)
    if health is not None:
        if health.get("home") == home_fingerprint(settings.paths.home):
            return Check("admin", True, f"this halo already answers on http://{host}:{port}/")
        return Check(
            "admin",
            False,
            f"another halo (a different HALO_HOME) holds port {port}",
            f"stop that halo, or set admin.port in {settings.paths.config_file} to a free port",
        )
    try:
        server = await asyncio.start_server(lambda r, w: None, host, port)
        server.close()
        await server.wait_closed()
    except OSError as exc:
        return Check("admin", False, f"{host}:{port} is taken: {exc.strerror}", "set admin.port to a free port")
    return Check("admin", True, f"{host}:{port} is free for the admin server and web chat")


async def check_semantic(settings: Settings) -> Check:
    """sqlite-vec loads, and the configured embedder loads (or why recall is full-text only)."""
    from memory.semantic import probe
    from memory.semantic.embedders import EmbedderUnavailable, load_embedder

    semantic = settings.memory.semantic
    if not semantic.enabled:
        return Check("semantic recall", True, "off (memory.semantic.enabled: false)")
    support = probe()
    if not support.fts5:
        return Check("semantic recall", False, support.problem or "no FTS5", "run `uv sync`")
    if not support.vectors:
        return Check("semantic recall", False, support.problem or "no sqlite-vec", "run `uv sync`")
    llm = settings.llm
    openai_like = llm.provider in ("openai", "openai-compatible")
    try:
        embedder = await load_embedder(
            semantic,
            llm_base_url=llm.base_url if openai_like else None,
            llm_api_key=llm.resolved_api_key() if openai_like else None,
        )
    except EmbedderUnavailable as exc:  # recall still works, on words alone: a warning, not a failure
        return Check(
            "semantic recall",
            True,
            f"full-text only: {exc}",
            "point memory.semantic.model at a local model folder, or set memory.semantic.embedder",
            warn=True,
        )
    if embedder is None:
        return Check("semantic recall", True, f"full-text only (embedder: none), sqlite-vec {support.vec_version}")
    return Check("semantic recall", True, f"hybrid: sqlite-vec {support.vec_version}, embedder {embedder.identity.key}")


def check_private_files(settings: Settings) -> Check:
    """HALO_HOME 0700 and its files 0600: it holds private chats and tokens."""
    from halo.workspace.private_files import loose_paths

    home = settings.paths.home
    loose = loose_paths(home)
    if not loose:
        return Check("private files", True, f"{home} and everything in it are readable by you alone")
    shown = ", ".join(f"{p.relative_to(home) if p != home else p} ({oct(m)})" for p, m in loose[:5])
    more = f" and {len(loose) - 5} more" if len(loose) > 5 else ""
    return Check(
        "private files",
        False,
        f"others on this machine can read: {shown}{more}",
        f"chmod -R go-rwx {home} (or start halo once: it fixes modes at start-up)",
    )


async def check_storage(settings: Settings) -> Check | None:
    """PostgreSQL, when `storage.url` is set: reachable, and its schema at this halo's head."""
    if settings.storage.url is None:
        return None
    logging.getLogger("alembic").setLevel(logging.WARNING)  # before it loads: its INFO lines are not news
    from halo.storage.postgres_health import schema_health

    return Check("postgresql", *await schema_health(settings.storage.url.get_secret_value()))


async def run_checks(settings: Settings) -> list[Check]:
    from policy import PolicyEngine, PolicyError

    checks = [
        Check(
            "config",
            True,
            f"{settings.paths.config_file} is valid, {len(settings.members)} "
            + ("member" if len(settings.members) == 1 else "members"),
        )
    ]
    checks.append(check_private_files(settings))
    try:
        PolicyEngine(settings.family_view(), extra_dir=settings.paths.policies)
        checks.append(Check("policy", True, "policies valid against the schema"))
    except PolicyError as exc:
        checks.append(Check("policy", False, str(exc), "fix or remove the named .cedar file"))
    found = await asyncio.gather(
        check_model(settings),
        check_telegram(settings),
        check_discord(settings),
        check_mqtt(settings),
        check_admin_port(settings),
        check_semantic(settings),
        check_storage(settings),
    )
    checks.extend(c for c in found if c is not None)
    return checks


def cmd_doctor(args: argparse.Namespace) -> int:
    home = default_home()
    try:
        settings = load_settings(home)
    except ConfigError as exc:
        print(f"✗ config: {exc}")
        return 1
    checks = asyncio.run(run_checks(settings))
    for c in checks:
        print(f"{c.mark} {c.name}: {c.detail}")
        if c.fix and (c.warn or not c.ok):
            print(f"    fix: {c.fix}")
    return 0 if all(c.ok for c in checks) else 1
