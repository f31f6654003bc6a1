"""`halo doctor`: check each part a family depends on and say what to fix."""

from __future__ import annotations

import argparse
import asyncio
from dataclasses import dataclass

import aiohttp

from config.loader import ConfigError, load_settings
from config.paths import default_home
from config.settings import Settings

TIMEOUT = aiohttp.ClientTimeout(total=5)


@dataclass(frozen=True, slots=True)
class Check:
    name: str
    ok: bool
    detail: str
    fix: str = ""


async def _get(url: str, headers: dict[str, str] | None = None) -> tuple[int, str]:
    async with aiohttp.ClientSession(timeout=TIMEOUT) as http, http.get(url, headers=headers) as resp:
        return resp.status, (await resp.text())[:200]


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


async def check_mqtt(settings: Settings) -> Check | None:
    """Connect and subscribe the way halo does, under a client id of the doctor's own (halo's
    fixed id would take over halo's persistent session)."""
    if not settings.mqtt.host:
        return None
    from adapters.mqtt.doctor import probe

    return Check("mqtt", *await probe(settings.mqtt))


async def check_admin_port(settings: Settings) -> Check:
    host, port = settings.admin.host, settings.admin.port
    try:
        status, _ = await _get(f"http://{host}:{port}/healthz")
        if status == 200:
            return Check("admin", True, f"halo already answers on http://{host}:{port}/")
    except (aiohttp.ClientError, TimeoutError):
        pass
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
    except EmbedderUnavailable as exc:
        return Check(
            "semantic recall",
            False,
            f"full-text only: {exc}",
            "point memory.semantic.model at a local model folder, or set memory.semantic.embedder",
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


async def run_checks(settings: Settings) -> list[Check]:
    from policy import PolicyEngine, PolicyError

    checks = [Check("config", True, f"{settings.paths.config_file} is valid, {len(settings.members)} members")]
    checks.append(check_private_files(settings))
    try:
        PolicyEngine(settings.family_view(), extra_dir=settings.paths.policies)
        checks.append(Check("policy", True, "policies valid against the schema"))
    except PolicyError as exc:
        checks.append(Check("policy", False, str(exc), "fix or remove the named .cedar file"))
    found = await asyncio.gather(
        check_model(settings),
        check_telegram(settings),
        check_mqtt(settings),
        check_admin_port(settings),
        check_semantic(settings),
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
        print(f"{'✓' if c.ok else '✗'} {c.name}: {c.detail}")
        if c.fix and not c.ok:
            print(f"    fix: {c.fix}")
    return 0 if all(c.ok for c in checks) else 1
