"""The `halo` command: serve, chat, doctor, policy explain, distill.

Imports are at the point of use: `halo --help`, `halo policy explain` and `halo doctor` must
not pay for the Agents SDK (seconds on a small machine) when they never talk to the model.
`tests/test_cli_imports.py` holds that, `bench/cli_startup.py` measures it.
"""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import logging
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol
from urllib.parse import quote

if TYPE_CHECKING:
    from pathlib import Path

    from config.family import Member
    from config.settings import Settings
    from halo.outbound.delivery import Delivery
    from halo.parts import FamilyServedElsewhere
    from halo.pipeline.inbound import GatewayInbound
    from memory.service import MemoryService

# Errors that mean "cannot start, and here is why", as (module, class). Looked up only in
# modules already loaded: a module never imported cannot have raised, and importing it just
# to name its error would load the Agents SDK for every command.
STARTUP_ERRORS = (
    ("config.loader", "ConfigError"),
    ("policy", "PolicyError"),
    ("halo.runtime.providers", "ProviderConfigError"),
    ("halo.storage.db", "StorageUnavailable"),
    ("halo.runtime.storage_cli", "StorageCommandError"),
)


class Chatting(Protocol):
    """What `halo chat` uses of a built halo: its work started, the way in, and the outbox its
    replies come back through."""

    inbound: GatewayInbound
    delivery: Delivery

    async def start_alone(self) -> None: ...

    async def close(self) -> None: ...


class Distilling(Protocol):
    """What `halo distill` uses of a built halo: memory, on the scope's current copy."""

    memory: MemoryService

    async def hold_family(self) -> None: ...

    async def take_scope(self, scope_id: str) -> None: ...

    async def close(self) -> None: ...


class StartupError(Exception):
    """A reason not to start, said plainly."""


def startup_errors() -> tuple[type[BaseException], ...]:
    found = [getattr(sys.modules[module], name) for module, name in STARTUP_ERRORS if module in sys.modules]
    return (StartupError, *found)


def _settings(create_starter: bool = False) -> Settings:
    from config.loader import load_settings
    from config.paths import default_home

    home = default_home()
    config_file = home / "halo.yaml"
    if create_starter and _write_starter_config(config_file):
        print(f"halo: wrote a starter config to {config_file} — edit it to add your family.", flush=True)
    return load_settings(home)


def _write_starter_config(config_file: Path) -> bool:
    from halo.runtime.starter import write_starter_config

    return write_starter_config(config_file)


def check_admin_exposure(settings: Settings) -> None:
    try:
        loopback = ipaddress.ip_address(settings.admin.host).is_loopback
    except ValueError:
        loopback = settings.admin.host == "localhost"
    if not loopback and settings.admin.token is None:
        raise StartupError(
            f"admin.host is {settings.admin.host}, which other machines can reach, and no admin.token "
            "is set. Set admin.token (or HALO_ADMIN__TOKEN) or bind to 127.0.0.1."
        )


def cmd_serve(args: argparse.Namespace) -> int:
    settings = _settings(create_starter=True)  # a config mistake is said before the SDK loads
    check_admin_exposure(settings)
    check_policies(settings)
    from halo.runtime.serve import serve

    try:
        asyncio.run(serve(settings, hard_deadline=True))
    except OSError as exc:
        raise StartupError(f"cannot listen on {settings.admin.host}:{settings.admin.port}: {exc.strerror}") from None
    return 0


def check_policies(settings: Settings) -> None:
    """The Cedar policies (halo's and HALO_HOME/policies/) parse: cheap, and no SDK needed."""
    from policy import PolicyEngine

    PolicyEngine(settings.family_view(), extra_dir=settings.paths.policies)


def cmd_chat(args: argparse.Namespace) -> int:
    from halo.runtime.app import build_halo

    settings = _settings(create_starter=True)
    member = settings.member(args.member) if args.member else settings.local_owner
    if member is None:
        known = ", ".join(m.id for m in settings.members) or "none"
        raise StartupError(f"no member {args.member!r} in {settings.paths.config_file} (members: {known})")
    from halo.parts import FamilyServedElsewhere

    try:
        asyncio.run(chat(build_halo(settings), member))
    except FamilyServedElsewhere as exc:
        raise served_elsewhere(exc, "chat", "its web chat: {address}/chat") from None
    return 0


def served_elsewhere(exc: FamilyServedElsewhere, doing: str, there: str) -> StartupError:
    """A CLI command that would act beside the process serving the family (PostgreSQL): where
    that one is, and what to do instead."""
    where = f" at {exc.address} ({there.format(address=exc.address)})" if exc.address else ""
    return StartupError(
        f"another halo serves this family{where}. On PostgreSQL one process serves a family at a "
        f"time: {doing} with that one, or stop it to {doing} here."
    )


async def chat(halo: Chatting, member: Member) -> None:
    from adapters.terminal import TerminalChat
    from halo.port import Sender

    try:
        await halo.start_alone()  # on PostgreSQL: as the process serving the family, or not at all
        terminal = TerminalChat(halo.inbound, Sender(member.id, name=member.name))
        halo.delivery.register("cli", terminal)  # replies and notices come back through it
        await terminal.run()
    finally:
        await halo.close()


def cmd_policy_explain(args: argparse.Namespace) -> int:
    from halo.core.scopes import UnknownScopeError, resolve_scope
    from policy import ACTIONS, PolicyEngine, explain

    if args.action not in ACTIONS:
        raise StartupError(f"no policy action {args.action!r}; the actions are: {', '.join(sorted(ACTIONS))}")
    settings = _settings()
    family = settings.family_view()
    engine = PolicyEngine(family, extra_dir=settings.paths.policies)
    member_id = args.member or (family.local_owner.id if family.local_owner else None)
    if member_id is None:
        raise StartupError("say whom to ask about: --member <member id>, or --member unknown")
    principal = family.member(member_id) if member_id != "unknown" else None
    if member_id != "unknown" and principal is None:
        raise StartupError(f"no member {member_id!r}; members: {', '.join(m.id for m in family.members)}")
    try:
        scope = resolve_scope(family, args.scope)
        from_scope = resolve_scope(family, args.from_scope) if args.from_scope else scope
    except UnknownScopeError as exc:
        raise StartupError(str(exc)) from None
    resource = family.member(args.about) if args.about else scope
    if resource is None:
        raise StartupError(f"no member {args.about!r}")
    decision = engine.decide(
        args.action,
        principal=principal,
        resource=resource,
        from_scope=from_scope,
        unknown_id="unknown" if principal is None else None,
        context=_explain_context(args.action, settings),
        audit=False,
    )
    print(explain(decision))
    return 0 if decision.allowed else 1


def _explain_context(action: str, settings: Settings) -> dict[str, bool] | None:
    """What the running halo tells the policy besides who and where (reminders: whether children
    may remind parents), so `policy explain` answers as halo would."""
    if action != "remind":
        return None
    from halo.reminders.service import remind_context

    return remind_context(settings.reminders.children_may_remind_parents)


def cmd_distill(args: argparse.Namespace) -> int:
    """Distil one scope now (and with --extract, run model extraction too), then say what changed."""
    from halo.core.scopes import UnknownScopeError, resolve_scope
    from halo.runtime.app import build_halo

    settings = _settings()
    try:
        resolve_scope(settings.family_view(), args.scope)
    except UnknownScopeError as exc:
        raise StartupError(str(exc)) from None
    if settings.storage.url is not None and (served := distill_through_running_halo(settings, args)) is not None:
        return served
    from halo.parts import FamilyServedElsewhere

    try:
        return asyncio.run(distill(build_halo(settings), args.scope, extract=args.extract))
    except FamilyServedElsewhere as exc:
        route = "POST {address}/sessions/" + quote(args.scope, safe="") + "/distill, or its dashboard"
        raise served_elsewhere(exc, "distil", route) from None


def distill_through_running_halo(settings: Settings, args: argparse.Namespace) -> int | None:
    """On PostgreSQL the process serving the family holds its memory in memory: a distillation
    beside it would be written over. So when a halo answers on this home's admin port, it
    distils (a standby forwards to the active one); None when none answers (this one then takes
    the family lease itself, or says which process elsewhere holds the family)."""
    from halo.workspace.config_reload import ask_running_halo

    try:
        status, body = ask_running_halo(settings, 120.0, path=f"/sessions/{quote(args.scope, safe='')}/distill")
    except OSError:
        return None
    if status != 200:
        print(f"halo: the running halo did not distil {args.scope}: {body.get('error', body)}", file=sys.stderr)
        return 1
    run = body["result"]
    print(
        f"distilled {args.scope} (by the running halo): {run['items']} new transcript items "
        f"(bytes {run['fromOffset']}→{run['toOffset']}); facts +{run['factsAdded']}, "
        f"superseded {run['factsSuperseded']}, forgotten {run['factsForgotten']}; notes +{run['notesAdded']}"
    )
    if args.extract:
        print("halo: --extract is left to the running halo (memory.extractor: llm, when the chat goes quiet)")
    return 0


async def distill(halo: Distilling, scope_id: str, *, extract: bool) -> int:
    from memory.service import DistillationDisabled, ExtractionUnavailable

    memory = halo.memory
    try:
        await halo.hold_family()  # PostgreSQL: as the process serving the family, or not at all
        await halo.take_scope(scope_id)  # PostgreSQL: the scope's memory from its store of record first
        result = await memory.distill(scope_id)
        print(
            f"distilled {scope_id}: {result.items} new transcript items "
            f"(bytes {result.from_offset}→{result.to_offset}); facts +{result.facts_added}, "
            f"superseded {result.facts_superseded}, forgotten {result.facts_forgotten}; "
            f"notes +{result.notes_added}"
        )
        if extract:
            extracted = await memory.extract(scope_id)
            print(
                f"extracted {scope_id}: {extracted.chunks} chunks, {extracted.failed_chunks} failed "
                f"(kept for later), {extracted.added} new entries, {extracted.duplicates} duplicates"
            )
        print(f"memory file: {memory.memory_path(scope_id)}")
        return 0
    except (DistillationDisabled, ExtractionUnavailable) as exc:
        print(f"halo: {exc}", file=sys.stderr)
        return 1
    finally:
        await halo.close()


def cmd_doctor(args: argparse.Namespace) -> int:
    from halo.runtime.doctor import cmd_doctor as doctor

    return doctor(args)


def cmd_dashboard(args: argparse.Namespace) -> int:
    """Print a fresh one-time login link; the running server redeems it (halo/web_auth.py)."""
    from halo.web_auth import LINK_SECONDS, dashboard_link

    settings = _settings()
    print(dashboard_link(settings))
    print(f"(works once, within {LINK_SECONDS // 60} minutes, on the halo serving HALO_HOME={settings.home})")
    return 0


def cmd_reload(args: argparse.Namespace) -> int:
    """Ask the running halo to apply halo.yaml now (it also does so by itself within seconds)."""
    from config.loader import ConfigError
    from halo.workspace.config_reload import ask_running_halo

    try:
        settings = _settings()
    except ConfigError as exc:  # the running halo refuses it too, and keeps its config
        print(f"halo: halo.yaml was not applied; the running halo keeps its config.\n{exc}", file=sys.stderr)
        return 1
    try:
        status, body = ask_running_halo(settings)
    except OSError as exc:
        where = f"{settings.admin.host}:{settings.admin.port}"
        print(
            f"halo: no halo answers on {where} ({exc}); the next `uv run halo serve` reads halo.yaml", file=sys.stderr
        )
        return 1
    if status != 200:
        print(f"halo: halo.yaml was not applied.\n{body.get('error', body)}", file=sys.stderr)
        return 1
    print("halo.yaml applied.")
    if body.get("restartNeeded"):
        print(f"restart halo for: {', '.join(body['restartNeeded'])}")
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    """The whole workspace into one archive, with progress on a terminal."""
    from pathlib import Path

    from config.paths import default_home
    from halo.runtime.storage_cli import storage_url_of
    from halo.workspace.backups import BackupError, export_workspace

    home = default_home()
    storage_url = storage_url_of(home)  # on PostgreSQL, the archive holds what lives there
    shown = sys.stderr.isatty()

    def progress(done: int, total: int, name: str) -> None:
        if shown:
            print(f"\rhalo: exporting {done}/{total} files", end="" if done < total else "\n", file=sys.stderr)

    dest = Path(args.path).expanduser()
    if not dest.parent.is_dir():  # a typo in a path makes no folders, least of all as root
        raise StartupError(f"no folder {dest.parent}: create it first, or name a path in a folder that exists")
    try:
        info = export_workspace(home, dest, progress=progress, storage_url=storage_url)
    except BackupError as exc:
        raise StartupError(str(exc)) from None
    print(f"exported {home} ({info.files} files, {info.bytes} bytes) to {info.path}")
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    """Restore a workspace archive as HALO_HOME (stop halo first)."""
    from pathlib import Path

    from config.paths import default_home
    from halo.workspace.backups import BackupError, import_workspace

    home, archive = default_home(), Path(args.path).expanduser()
    if not archive.is_file():
        raise StartupError(f"no archive at {archive} (make one with `uv run halo export <path>`)")
    try:
        restored = import_workspace(archive, home, force=args.force)
    except BackupError as exc:
        raise StartupError(str(exc)) from None
    print(f"imported {len(restored)} files into {home}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="halo", description="A family-first chat-bot gateway.")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", required=True)

    sub.add_parser("serve", help="run the gateway, its adapters and the admin server").set_defaults(fn=cmd_serve)

    chat = sub.add_parser("chat", help="talk to halo in this terminal")
    chat.add_argument("--member", help="member id to speak as (default: the local owner)")
    chat.set_defaults(fn=cmd_chat)

    distill = sub.add_parser("distill", help="distil a scope's transcript into its memory files now")
    distill.add_argument("scope", help="scope id, e.g. telegram:1002 or web:mom")
    distill.add_argument("--extract", action="store_true", help="also run model extraction (memory.extractor: llm)")
    distill.set_defaults(fn=cmd_distill)

    sub.add_parser("doctor", help="check config, tokens, broker and model, and say what to fix").set_defaults(
        fn=cmd_doctor
    )

    export = sub.add_parser("export", help="write the whole workspace to one archive (tar.gz)")
    export.add_argument("path", help="the archive to write, e.g. halo-backup.tar.gz")
    export.set_defaults(fn=cmd_export)
    restore = sub.add_parser("import", help="restore a workspace archive as HALO_HOME (stop halo first)")
    restore.add_argument("path", help="an archive made by halo export")
    restore.add_argument("--force", action="store_true", help="replace an existing workspace (kept aside)")
    restore.set_defaults(fn=cmd_import)

    sub.add_parser("reload", help="apply halo.yaml to the running halo now").set_defaults(fn=cmd_reload)

    from halo.runtime.storage_cli import add_storage_commands

    add_storage_commands(sub)

    sub.add_parser("dashboard", help="print a fresh one-time login link to the dashboard").set_defaults(
        fn=cmd_dashboard
    )

    policy = sub.add_parser("policy", help="policy tools")
    policy_sub = policy.add_subparsers(dest="policy_command", required=True)
    explain = policy_sub.add_parser("explain", help="show a decision and why")
    explain.add_argument("--member", help="member id, or 'unknown' (default: the owner)")
    explain.add_argument("--scope", required=True, help="scope id, e.g. telegram:-1001234")
    explain.add_argument("--action", default="converse")
    explain.add_argument("--from-scope", help="where the request is made from (default: --scope)")
    explain.add_argument("--about", help="a member id, for read_memory of their USER.md")
    explain.set_defaults(fn=cmd_policy_explain)
    return parser


LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
# libraries that say at INFO what nobody reading halo's log needs
QUIET_LOGGERS = ("httpx", "openai", "aiohttp.access", "apscheduler")
# and what only someone debugging wants: Alembic's seven lines at every PostgreSQL start (`halo -v`)
VERBOSE_ONLY_LOGGERS = ("alembic",)


def configure_logging(command: str, *, verbose: bool) -> None:
    """Log lines go to stderr, except in `halo chat`: there the terminal is a conversation, and a
    log line printed between a question and its answer lands in the prompt. Its lines go to
    HALO_HOME/logs/chat.log instead (what stops halo from starting is still said on stderr)."""
    from config.paths import default_home

    if not logging.getLogger().handlers:  # in-process callers (tests) keep their own
        handlers: list[logging.Handler] | None = None
        if command == "chat":
            logs = default_home() / "logs"
            logs.mkdir(mode=0o700, parents=True, exist_ok=True)
            handlers = [logging.FileHandler(logs / "chat.log", encoding="utf-8")]
        logging.basicConfig(level=logging.DEBUG if verbose else logging.INFO, format=LOG_FORMAT, handlers=handlers)
    for noisy in (*QUIET_LOGGERS, *(() if verbose else VERBOSE_ONLY_LOGGERS)):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def main(argv: Sequence[str] | None = None) -> int:
    from halo.workspace.private_files import private_umask

    private_umask()  # every file halo writes holds a family's private words or a token
    args = build_parser().parse_args(argv)
    configure_logging(args.command, verbose=args.verbose)
    try:
        return int(args.fn(args) or 0)
    except startup_errors() as exc:  # words, never a traceback; exit 2 as argparse does for bad arguments
        starts = args.command in ("serve", "chat")
        print(f"halo: cannot start.\n{exc}" if starts else f"halo: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `halo policy explain … | head`: the reader left, nothing is wrong
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit
        return 0


if __name__ == "__main__":
    sys.exit(main())
