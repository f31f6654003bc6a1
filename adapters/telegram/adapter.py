"""The Telegram adapter: updates in as envelopes; halo's outbox hands it messages to send.

python-telegram-bot long-polls by default; with `telegram.webhook_url` set, Telegram posts
updates to halo's own HTTP server instead (a reverse proxy forwards that one path). Each
update is handled once (ids are recorded in halo.db), chats are handled concurrently and
each chat in order. The adapter translates and delivers; what to answer, and whether to
answer at all, is the gateway's and the policy's business.

halo keeps running when Telegram is unreachable: connecting is retried in the background
with growing pauses, replies wait in halo's outbox (`send` raises `SendFailed`), and
`status()` says what is wrong.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import logging
import warnings
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlparse

from aiohttp import web
from telegram import (
    BotCommand,
    BotCommandScopeAllPrivateChats,
    BotCommandScopeChat,
    CallbackQuery,
    ChatMemberRestricted,
    InlineKeyboardButton,
    InlineKeyboardMarkup,
    ReplyParameters,
    Update,
)
from telegram.constants import ChatMemberStatus, ParseMode
from telegram.error import BadRequest, ChatMigrated, Forbidden, InvalidToken, RetryAfter, TelegramError
from telegram.ext import Application, ContextTypes, TypeHandler
from telegram.warnings import PTBDeprecationWarning

from adapters.offers import OfferedCopies
from adapters.telegram.connection import (
    Health,
    PerChatOrder,
    PollingRequest,
    TrackedRequest,
    describer,
    hide_token_in_logs,
)
from adapters.telegram.format import split_message, to_html
from adapters.telegram.normalise import BotIdentity, sender_of, to_incoming
from adapters.telegram.progress import ChatProgress
from adapters.telegram.store import TelegramStore
from config.settings import TelegramSettings
from halo.port import (
    Audit,
    ChatMembership,
    Choice,
    Directory,
    Inbound,
    Outbound,
    Press,
    Reply,
    Route,
    SendFailed,
    Tables,
    takes_body,
)

log = logging.getLogger(__name__)

# text, the join/leave service messages the group guard needs, and button presses
ALLOWED_UPDATES = ["message", "callback_query"]
MAX_RECONNECT_PAUSE = 60.0
STOP_POLLING_WITHIN = 5.0
DEFAULT_WEBHOOK_PATH = "/telegram/webhook"


class TelegramAdapter:
    """Telegram through python-telegram-bot. Implements `halo.port.Adapter`, `PresenceCheck`
    and `AdminRoutes` (the webhook, in webhook mode)."""

    platform = "telegram"

    def __init__(
        self,
        inbound: Inbound,
        directory: Directory,
        settings: TelegramSettings,
        tables: Tables,
        audit: Audit,
        *,
        may_poll: Callable[[], bool] = lambda: True,
    ) -> None:
        """`may_poll`: whether this process serves the family now (several processes: the
        family lease, by this process's own clock); getUpdates is not asked meanwhile."""
        if settings.token is None:
            raise ValueError("telegram.token is not set")
        self.inbound = inbound
        self.directory = directory
        self.settings = settings
        self.audit = audit
        token = settings.token.get_secret_value()
        hide_token_in_logs(token)
        self.describe = describer(token)
        self.health = Health(on_back=self._back)
        self._nudges: set[asyncio.Task[None]] = set()
        self.store = TelegramStore(tables)
        self.identity: BotIdentity | None = None
        self.last_update_id: int | None = None
        self.webhook_secret = (
            settings.webhook_secret.get_secret_value()
            if settings.webhook_secret
            else hashlib.sha256(f"halo-webhook:{token}".encode()).hexdigest()[:48]
        )
        self.webhook_path: str | None = None
        if settings.webhook_url:
            self.webhook_path = urlparse(settings.webhook_url).path or DEFAULT_WEBHOOK_PATH
        self.audit = audit
        self._may_poll = may_poll
        self.app = self._application(token)
        self._migrated: dict[int, int] = {}  # groups that became supergroups: old chat id → new
        self._parts_sent: dict[str, int] = {}  # outbox id → pieces already delivered
        self._offered = OfferedCopies()  # a decided ask's buttons go from every copy
        self._working: dict[str, ChatProgress] = {}  # envelope id → its chat's chrome, while halo works on it
        self._runner: asyncio.Task[None] | None = None

    def _application(self, token: str) -> Application[Any, Any, Any, Any, Any, Any]:
        timeouts = {"connect_timeout": 10.0, "read_timeout": 20.0, "write_timeout": 20.0, "pool_timeout": 10.0}
        builder = (
            Application.builder()
            .token(token)
            .request(TrackedRequest(self.health, self.describe, connection_pool_size=32, **timeouts))
            .get_updates_request(
                PollingRequest(self.health, self.describe, self._may_poll, connection_pool_size=1, **timeouts)
            )
            .concurrent_updates(PerChatOrder(64))
            .job_queue(None)
        )
        if self.settings.base_url:
            builder = builder.base_url(self.settings.base_url)
            if self.settings.base_url.rstrip("/").endswith("/bot"):  # a self-hosted Bot API serves files too
                builder = builder.base_file_url(self.settings.base_url.rstrip("/")[: -len("/bot")] + "/file/bot")
        if self.settings.webhook_url:
            builder = builder.updater(None)
        app = builder.build()
        app.add_handler(TypeHandler(Update, self._on_update))
        app.add_error_handler(self._on_error)
        return app

    # --- lifecycle -------------------------------------------------------------------

    async def start(self) -> None:
        """Returns at once; connecting (and reconnecting) happens in the background."""
        self.last_update_id = await self.store.last_update_id()
        await self.store.forget_old_updates()
        self._runner = asyncio.create_task(self._connect_until_up(), name="telegram-connect")

    async def _connect_until_up(self) -> None:
        pause = self.settings.retry_backoff_seconds
        while True:
            try:
                await self._connect()
                break
            except InvalidToken:
                self.health.failed("Telegram rejected the bot token: check telegram.token (from @BotFather)")
                log.error("Telegram rejected the bot token; the Telegram adapter is not running")
                return
            except Exception as exc:  # unreachable, or anything else: halo runs on, /status says why
                self.health.failed(self.describe(exc))
                log.warning(
                    "Telegram is unreachable, trying again in %.0fs: %s",
                    pause,
                    self.describe(exc),
                    exc_info=not isinstance(exc, TelegramError),
                )
                await asyncio.sleep(pause)
                pause = min(pause * 2, MAX_RECONNECT_PAUSE)
        log.info(
            "Telegram: @%s is %s",
            self.identity.username if self.identity else "?",
            "receiving a webhook" if self.settings.webhook_url else "polling",
        )

    async def _connect(self) -> None:
        app = self.app
        await app.initialize()  # getMe: checks the token and tells us who we are
        me = app.bot.bot
        self.identity = BotIdentity(me.id, me.username or "")
        if not app.running:
            await app.start()
        await self._register_commands()
        if self.settings.webhook_url:
            await app.bot.set_webhook(
                self.settings.webhook_url, secret_token=self.webhook_secret, allowed_updates=ALLOWED_UPDATES
            )
        elif app.updater is not None and not app.updater.running:
            await app.updater.start_polling(
                timeout=timedelta(seconds=self.settings.poll_timeout_seconds),
                allowed_updates=ALLOWED_UPDATES,
                error_callback=self._polling_error,
            )
        self.health.ok()

    async def _register_commands(self) -> None:
        """The "/" menus: in private chats, and in each group the family names, the commands
        that kind of chat supports, with their descriptions."""
        for menu in self.directory.menus("telegram"):
            commands = [BotCommand(name, summary[:256]) for name, _, summary in menu.commands]
            scope = BotCommandScopeAllPrivateChats() if menu.chat_id is None else BotCommandScopeChat(int(menu.chat_id))
            try:
                await self.app.bot.set_my_commands(commands, scope=scope)
            except TelegramError as exc:  # a missing menu is cosmetic; commands still work
                log.warning("could not register the Telegram command menu: %s", self.describe(exc))

    def _polling_error(self, exc: TelegramError) -> None:
        """python-telegram-bot retries polling itself (backing off up to 30 s); we keep status."""
        self.health.failed(self.describe(exc))
        log.warning("Telegram polling failed, retrying: %s", self.describe(exc))

    async def stop(self) -> None:
        """Stop receiving, finish updates in progress and their deliveries, close connections."""
        if self._runner is not None and not self._runner.done():
            self._runner.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._runner
        app = self.app
        if app.updater is not None and app.updater.running:
            try:  # its retry pause after a network error is not interruptible: bound the wait
                await asyncio.wait_for(app.updater.stop(), STOP_POLLING_WITHIN)
            except TimeoutError:
                log.warning("Telegram polling did not stop in time; unconfirmed updates come again next start")
        if app.running:
            await app.stop()  # waits for the updates being handled
        await app.shutdown()
        await app.bot.shutdown()  # also when initialising never succeeded

    def _back(self) -> None:
        """Telegram answers again: what waits in the outbox goes now, not at its next retry."""
        task = asyncio.get_running_loop().create_task(self.inbound.reconnected("telegram"))
        self._nudges.add(task)
        task.add_done_callback(self._nudges.discard)

    def status(self) -> dict[str, Any]:
        health = self.health
        return {
            "connected": health.connected,
            "mode": "webhook" if self.settings.webhook_url else "polling",
            "bot": f"@{self.identity.username}" if self.identity else None,
            "last_ok_at": _iso(health.last_ok_at),
            "last_error": health.last_error,
            "last_error_at": _iso(health.last_error_at),
            "last_update_id": self.last_update_id,
        }

    # --- outbound --------------------------------------------------------------------

    async def send(self, message: Outbound) -> None:
        """Send to a Telegram chat (`telegram:<chat id>`), split into Telegram-sized pieces, as
        HTML (plain text when Telegram cannot parse it). Raises `SendFailed`: with
        `retry_after` on 429 and network errors, `permanent` when the bot was blocked or the
        chat is gone."""
        platform, _, chat = message.scope_id.partition(":")
        if platform != "telegram" or not chat.lstrip("-").isdigit():
            raise SendFailed(f"{message.scope_id!r} is not a Telegram chat", permanent=True)
        if self.identity is None:
            raise SendFailed("Telegram is not connected yet", retry_after=self.settings.retry_backoff_seconds)
        chat_id = self._migrated.get(int(chat), int(chat))
        reply_to = int(message.reply_to) if message.reply_to and message.reply_to.isdigit() else None
        done = self._parts_sent.get(message.id, 0)  # a retry does not repeat pieces that went out
        pieces = split_message(message.text)
        progress = self._working.get(message.in_reply_to_envelope or "") if message.kind == "reply" else None
        if progress is not None and done == 0:
            await progress.finish(message.text)  # the draft, if one streamed, shows the whole reply first
        try:
            for n, piece in enumerate(pieces):
                if n < done:
                    continue
                buttons = _keyboard(message.choices) if n == len(pieces) - 1 else None  # under the last piece
                chat_id, sent_id = await self._send_piece(chat_id, piece, reply_to if n == 0 else None, buttons)
                self._parts_sent[message.id] = n + 1
                if buttons is not None:
                    self._offered.sent(message.choices, chat_id, sent_id)
            self._parts_sent.pop(message.id, None)
            if progress is not None:
                await progress.replied()
        except RetryAfter as exc:
            raise SendFailed(self.describe(exc), retry_after=_retry_after(exc)) from exc
        except (Forbidden, BadRequest) as exc:  # blocked, kicked, chat not found: no retry helps
            self._parts_sent.pop(message.id, None)
            self.audit.write(
                "telegram_delivery_failed", chat_id=chat_id, outbox_id=message.id, error=self.describe(exc)
            )
            raise SendFailed(self.describe(exc), permanent=True) from exc
        except TelegramError as exc:  # network errors, timeouts, server errors: worth a retry
            raise SendFailed(self.describe(exc)) from exc

    async def _send_piece(
        self, chat_id: int, text: str, reply_to: int | None, buttons: InlineKeyboardMarkup | None = None
    ) -> tuple[int, int]:
        """One sendMessage; returns the chat id it went to (a group may have become a supergroup)
        and the message's id."""
        reply = ReplyParameters(reply_to, allow_sending_without_reply=True) if reply_to else None
        bot = self.app.bot
        try:
            sent = await bot.send_message(
                chat_id, to_html(text), parse_mode=ParseMode.HTML, reply_parameters=reply, reply_markup=buttons
            )
        except ChatMigrated as exc:
            self._migrated[chat_id] = exc.new_chat_id
            return await self._send_piece(exc.new_chat_id, text, reply_to, buttons)
        except BadRequest as exc:
            if "parse entities" not in exc.message.lower():
                raise
            sent = await bot.send_message(chat_id, text, reply_parameters=reply, reply_markup=buttons)
        return chat_id, sent.message_id

    async def _close_offer(self, choice_id: str, chat_id: int, message_id: int) -> None:
        """A decided ask's buttons go from the pressed message and from every other copy this
        process sent (each parent's DM had one). A copy sent before a restart keeps them until it
        is pressed, and then says the ask is decided."""
        copies = self._offered.decided(choice_id)
        for chat, message in [(chat_id, message_id), *((c, m) for c, m in copies if (c, m) != (chat_id, message_id))]:
            with contextlib.suppress(TelegramError):
                await self.app.bot.edit_message_reply_markup(chat, message, reply_markup=None)

    async def still_in_chat(self, scope_id: str, user_id: str) -> bool | None:
        """Whether a user is still in a group, or None when Telegram cannot say (unreachable)."""
        try:
            member = await self.app.bot.get_chat_member(int(scope_id.partition(":")[2]), int(user_id))
        except BadRequest as exc:
            return False if "not found" in exc.message.lower() else None
        except TelegramError:
            return None
        if isinstance(member, ChatMemberRestricted):
            return member.is_member
        return member.status not in (ChatMemberStatus.LEFT, ChatMemberStatus.BANNED)

    # --- inbound ---------------------------------------------------------------------

    async def _on_update(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        if await self.store.seen(update.update_id):
            log.info("Telegram update %s was handled before; not answering it again", update.update_id)
            return
        await self._handle(update)
        await self.store.complete(update.update_id)
        self.last_update_id = max(self.last_update_id or 0, update.update_id)

    async def _handle(self, update: Update) -> None:
        """Hand the message to halo; its reply comes back through `send`, from halo's outbox."""
        if update.callback_query is not None:
            await self._pressed(update.callback_query)
            return
        message = update.message
        if message is None or self.identity is None:
            return
        inbound = self.inbound
        if (odd := _odd_ids(message)) is not None:  # a forged update: nothing of it is stored or answered
            log.warning("ignoring Telegram update %s: %s", update.update_id, odd)
            self.audit.write("telegram_refused", update_id=update.update_id, reason=odd)
            return
        chat = message.chat
        for user in message.new_chat_members or ():  # the bot itself added: halo may tell the group something
            itself = user.id == self.identity.id
            await inbound.membership(ChatMembership("telegram", str(chat.id), sender_of(user), True, itself))
        if message.left_chat_member is not None:
            await inbound.membership(
                ChatMembership("telegram", str(chat.id), sender_of(message.left_chat_member), False)
            )

        incoming = to_incoming(message, self.identity)
        if incoming is None:
            return
        progress = ChatProgress(
            self.app.bot,
            chat.id,
            private=chat.type == "private",
            message_id=message.message_id,
            draft_every=self.settings.draft_interval_ms / 1000 if self.settings.stream_drafts else None,
            react=self.settings.react_on_receipt,
        )
        self._working[incoming.id] = progress
        try:
            await progress.received()
            await inbound.receive(incoming, progress)
        finally:
            self._working.pop(incoming.id, None)
            await progress.stop()

    async def _pressed(self, query: CallbackQuery) -> None:
        """A button under one of halo's messages: halo decides what it may do; the presser gets
        a short answer, and a decided ask's buttons go from that message."""
        message = query.message
        if self.identity is None or message is None or not isinstance(query.data, str) or query.from_user.is_bot:
            with contextlib.suppress(TelegramError):
                await query.answer()
            return
        chat = message.chat
        press = Press(
            "telegram",
            str(chat.id),
            "private" if chat.type == "private" else "group",
            sender_of(query.from_user),
            query.data,
            message_id=str(message.message_id),
        )
        pressed = await self.inbound.press(press)
        with contextlib.suppress(TelegramError):  # the toast is chrome; the decision is made already
            await query.answer(pressed.answer[:200])
        if pressed.closed:
            await self._close_offer(query.data, chat.id, message.message_id)

    async def _on_error(self, update: object, context: ContextTypes.DEFAULT_TYPE) -> None:
        error = context.error
        update_id = update.update_id if isinstance(update, Update) else None
        log.error(
            "handling Telegram update %s failed: %s",
            update_id,
            self.describe(error) if error else "unknown error",
            exc_info=error,
        )

    # --- webhook ---------------------------------------------------------------------

    def routes(self) -> list[Route]:
        """In webhook mode, Telegram posts updates to the admin server at the webhook URL's path.
        Its secret header is its credential; it is Telegram's API, not halo's, so undocumented."""
        if self.webhook_path is None:
            return []
        webhook = Route(
            "POST",
            self.webhook_path,
            self._webhook,
            "anyone",
            summary="Telegram's webhook",
            responses={200: Reply("the update is queued")},
            tag="telegram",
            documented=False,
        )
        return [webhook]

    @takes_body
    async def _webhook(self, request: web.Request) -> web.Response:
        given = request.headers.get("X-Telegram-Bot-Api-Secret-Token")
        if given is None or not hmac.compare_digest(given.encode(), self.webhook_secret.encode()):
            return web.json_response({"error": "wrong or missing secret token"}, status=403)
        if not self.app.running:
            return web.json_response({"error": "not ready; Telegram will retry"}, status=503)
        try:
            update = Update.de_json(await request.json(), self.app.bot)
        except (ValueError, TypeError, KeyError):
            return web.json_response({"error": "not a Telegram update"}, status=400)
        await self.app.update_queue.put(update)
        return web.json_response({"ok": True})


def _keyboard(choices: tuple[Choice, ...]) -> InlineKeyboardMarkup | None:
    """One button a row: labels stay whole on a phone. The data is the choice's opaque id."""
    if not choices:
        return None
    return InlineKeyboardMarkup([[InlineKeyboardButton(c.label, callback_data=c.id)] for c in choices])


def _retry_after(exc: RetryAfter) -> float:
    """Seconds to wait, whether this PTB version gives an int or a timedelta."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PTBDeprecationWarning)  # the int form is deprecated, not wrong
        value = exc.retry_after
    return value.total_seconds() if isinstance(value, timedelta) else float(value)


INT64 = range(-(2**63), 2**63)  # Telegram's ids fit a signed 64-bit integer; so do halo.db's columns


def _odd_ids(message: Any) -> str | None:
    """Why an update cannot be real (an id Telegram never sends), or None when it can."""
    users = [message.from_user, message.left_chat_member, *(message.new_chat_members or ())]
    ids = {"chat": message.chat.id, **{f"user {i}": u.id for i, u in enumerate(users) if u is not None}}
    for what, value in ids.items():
        if not isinstance(value, int) or value not in INT64:
            return f"{what} id {str(value)[:40]} does not fit a 64-bit integer"
    return None


def _iso(ts: float | None) -> str | None:
    return datetime.fromtimestamp(ts, UTC).isoformat() if ts is not None else None
