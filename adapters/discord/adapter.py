"""The Discord adapter: discord.py's gateway events in as envelopes, `Outbound`s out as messages.

Where halo listens:
- a work channel (`work.discord_channel_ids`, scope `discord:<channel id>`): every message
  goes in, answered only when halo is mentioned, replied to, or given a `/command` (the
  rest is kept as the channel's context);
- a DM: scope `discord:<user id>` (halo/scopes.py says why the user id), a member's DM or,
  for anyone else, the pairing flow — the gateway and the policy decide;
- any other channel: silence; the first time halo is addressed there it says once which
  channel id a parent would configure.

Bots, halo included, are ignored. Each message id is claimed in halo.db before it is
handled, so a resumed session or a redelivery never makes a second answer. Replies are
split at 2,000 characters (adapters/discord/split.py), the first part sent as a reply to
the message; "typing…" shows while the model works. Rate limits are discord.py's job; any
other failure becomes `SendFailed` for the outbox to retry (or give up on, if permanent).

`discord.api_base_url` and `discord.gateway_url` point discord.py at a stand-in server
(tests). discord.py reads both from class attributes (`Route.BASE`,
`DiscordWebSocket.DEFAULT_GATEWAY`), so they are process-wide: one Discord per process.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, Literal

import aiohttp
import discord
import yarl
from discord.gateway import DiscordWebSocket
from discord.http import Route

from adapters.discord.commands import command_tree
from adapters.discord.seen import SeenMessages
from adapters.discord.split import split_message
from adapters.offers import OfferedCopies
from config.settings import DiscordSettings
from halo.port import (
    Attachment,
    Choice,
    Directory,
    Inbound,
    Incoming,
    Outbound,
    Press,
    Progress,
    Sender,
    SendFailed,
    VoiceNote,
    attachment_kind,
)

log = logging.getLogger(__name__)

MAX_RECONNECT_PAUSE = 60.0
TYPING_EVERY = 8.0  # Discord shows "typing…" for about ten seconds per call


def point_at(settings: DiscordSettings) -> None:
    """Send discord.py's REST calls and gateway connection to a stand-in server, if configured."""
    if settings.api_base_url:
        Route.BASE = settings.api_base_url.rstrip("/")
    if settings.gateway_url:
        DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(settings.gateway_url)


class _Client(discord.Client):
    """discord.py's client, with its events handed to the adapter and halo's slash commands."""

    def __init__(self, adapter: DiscordAdapter) -> None:
        intents = discord.Intents.none()
        intents.guilds = True
        intents.guild_messages = True
        intents.dm_messages = True
        intents.message_content = True
        super().__init__(
            intents=intents,
            allowed_mentions=discord.AllowedMentions.none(),
            guild_ready_timeout=adapter.settings.guild_ready_seconds,
        )
        self.adapter = adapter
        self.tree = command_tree(self, adapter.run_command, adapter.suggest)

    async def on_ready(self) -> None:
        self.adapter.on_ready()

    async def on_message(self, message: discord.Message) -> None:
        await self.adapter.on_message(message)

    async def on_interaction(self, interaction: discord.Interaction) -> None:
        if interaction.type is discord.InteractionType.component:
            await self.adapter.on_press(interaction)


class _Typing:
    """ "typing…" in one channel from when the model is asked until the reply goes out."""

    def __init__(self, channel: discord.abc.Messageable) -> None:
        self.channel = channel
        self._task: asyncio.Task[None] | None = None

    async def model_started(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._keep_typing())

    async def delta(self, text: str) -> None:
        return None

    async def _keep_typing(self) -> None:
        while True:
            try:
                await self.channel.typing()
            except (discord.HTTPException, aiohttp.ClientError) as exc:  # cosmetic: never fails a turn
                log.debug("typing indicator failed: %s", exc)
            await asyncio.sleep(TYPING_EVERY)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None


class DiscordAdapter:
    platform = "discord"
    name = "discord"

    def __init__(self, inbound: Inbound, directory: Directory, settings: DiscordSettings, seen: SeenMessages) -> None:
        if settings.token is None:
            raise ValueError("discord.token is not set")
        self.inbound = inbound
        self.directory = directory
        self.settings = settings
        self.seen = seen
        self.client: _Client | None = None
        self._runner: asyncio.Task[None] | None = None
        self._connected = False
        self._last_error: str | None = None
        self._handled = 0
        self._dm_channels: dict[int, discord.abc.Messageable] = {}  # user id → DM channel
        self._guild_channels: set[int] = set()  # guild channels seen: a message to one goes to it, not a DM
        self._typing: dict[int, _Typing] = {}  # channel id → its typing indicator
        self._in_order: dict[int, asyncio.Lock] = {}  # channel id → messages handled in order
        self._parts_sent: dict[str, int] = {}  # outbox id → parts already delivered
        self._offered = OfferedCopies()  # a decided ask's buttons go from every copy
        self._turns: set[asyncio.Task[None]] = set()
        self._asked: dict[str, tuple[discord.Interaction, bool]] = {}  # envelope id → its slash command, ephemeral
        self._synced: set[int] = set()  # guilds whose slash commands are registered
        self._syncing: asyncio.Task[None] | None = None

    # --- lifecycle ---------------------------------------------------------------------

    async def start(self) -> None:
        """Returns at once; logging in and (re)connecting happen in the background."""
        point_at(self.settings)
        await self.seen.forget_old()
        self._runner = asyncio.create_task(self._run(), name="discord")

    async def _run(self) -> None:
        assert self.settings.token is not None
        token = self.settings.token.get_secret_value()
        pause = 1.0
        while True:
            self.client = _Client(self)
            try:
                await self.client.start(token, reconnect=True)
                return
            except discord.LoginFailure:
                self._last_error = "Discord rejected the bot token: check discord.token"
                log.error("Discord rejected the bot token; the Discord adapter is not running")
                return
            except discord.PrivilegedIntentsRequired:
                self._last_error = "enable the Message Content intent for the bot in the Discord developer portal"
                log.error("Discord: %s", self._last_error)
                return
            except (OSError, aiohttp.ClientError, discord.HTTPException, discord.GatewayNotFound) as exc:
                self._last_error = f"Discord is unreachable: {type(exc).__name__}"
                log.warning("Discord is unreachable, trying again in %.0fs: %s", pause, type(exc).__name__)
            finally:
                self._connected = False
                if not self.client.is_closed():
                    await self.client.close()
            await asyncio.sleep(pause)
            pause = min(pause * 2, MAX_RECONNECT_PAUSE)

    def on_ready(self) -> None:
        self._connected = True
        self._last_error = None
        assert self.client is not None and self.client.user is not None
        log.info("Discord: connected as %s", self.client.user)
        if self._syncing is None or self._syncing.done():
            self._syncing = asyncio.create_task(self._register_commands(self.client), name="discord-commands")

    async def _register_commands(self, client: _Client) -> None:
        """The slash commands, registered in each guild that holds a configured work channel
        (a guild's commands show at once; global ones take up to an hour)."""
        work = {int(m.chat_id) for m in self.directory.menus("discord") if m.chat_id is not None}
        guilds = {c.guild.id for c in map(client.get_channel, work) if isinstance(c, discord.abc.GuildChannel)}
        for guild_id in sorted(guilds - self._synced):
            guild = discord.Object(id=guild_id)
            client.tree.copy_global_to(guild=guild)
            try:
                await client.tree.sync(guild=guild)
            except (discord.HTTPException, aiohttp.ClientError) as exc:  # the typed commands still work
                log.warning("could not register Discord's slash commands in guild %s: %s", guild_id, exc)
                continue
            self._synced.add(guild_id)

    def commands_registered(self) -> set[int]:
        return set(self._synced)

    async def stop(self) -> None:
        """Stop taking messages, let turns in progress finish, close the connection."""
        if self.client is not None and not self.client.is_closed():
            await self.client.close()
        if self._runner is not None:
            self._runner.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._runner
        if self._turns:
            await asyncio.gather(*list(self._turns), return_exceptions=True)
        for typing in list(self._typing.values()):
            await typing.stop()
        self._connected = False

    def status(self) -> dict[str, Any]:
        user = self.client.user if self.client is not None else None
        return {
            "connected": self._connected and self.client is not None and self.client.is_ready(),
            "bot": str(user) if user else None,
            "guilds": len(self.client.guilds) if self.client is not None else 0,
            "messagesHandled": self._handled,
            "lastError": self._last_error,
        }

    # --- inbound -----------------------------------------------------------------------

    async def on_message(self, message: discord.Message) -> None:
        client = self.client
        if client is None or client.user is None or message.author.bot or message.author.id == client.user.id:
            return
        channel_id = message.channel.id
        task = asyncio.current_task()
        if task is not None:
            self._turns.add(task)
        try:
            async with self._in_order.setdefault(channel_id, asyncio.Lock()):
                if not await self.seen.claim(message.id):
                    return  # a replay or redelivery: answered already
                await self._take(message, client.user)
        except Exception:
            log.exception("handling Discord message %s failed", message.id)
        finally:
            if task is not None:
                self._turns.discard(task)

    async def _take(self, message: discord.Message, me: discord.ClientUser) -> None:
        """Hand what the message said to halo; its reply comes back through `send`."""
        is_dm = message.guild is None
        author = message.author
        text = re.sub(rf"<@!?{me.id}>", "", message.content).strip()
        if is_dm:
            self._dm_channels[author.id] = message.channel  # replies to this user go here
        else:
            self._guild_channels.add(message.channel.id)
        voice = _voice_note(message)
        attachment = _attachment(message)
        addressed = is_dm or self._addressed(message, me, text)
        if not text and voice is None and attachment is None and not addressed:
            return
        incoming = Incoming(
            platform="discord",
            chat_id=str(author.id if is_dm else message.channel.id),  # a DM is named by the user (halo/core/scopes.py)
            chat_kind="private" if is_dm else "group",
            sender=Sender(str(author.id), name=author.display_name, username=author.name, is_bot=author.bot),
            text=text,
            addressed=addressed,
            message_id=str(message.id),
            reply_to=str(message.reference.message_id) if message.reference and message.reference.message_id else None,
            voice=voice,
            attachment=attachment,
            ts=message.created_at.astimezone(UTC) if message.created_at else datetime.now(UTC),
        )
        typing = self._typing.setdefault(message.channel.id, _Typing(message.channel))
        progress: Progress = typing
        try:
            await self.inbound.receive(incoming, progress)  # its reply comes back through `send`
            self._handled += 1
        finally:
            await typing.stop()

    @staticmethod
    def _addressed(message: discord.Message, me: discord.ClientUser, text: str) -> bool:
        if text.startswith("/") or any(u.id == me.id for u in message.mentions):
            return True
        resolved = message.reference.resolved if message.reference else None
        return isinstance(resolved, discord.Message) and resolved.author.id == me.id

    # --- slash commands and buttons ---------------------------------------------------

    @staticmethod
    def _where(interaction: discord.Interaction) -> tuple[str, Literal["private", "group"]]:
        """A DM is named by the user (halo/core/scopes.py), a guild channel by its id."""
        if interaction.guild_id is None:
            return str(interaction.user.id), "private"
        return str(interaction.channel_id), "group"

    @staticmethod
    def _sender(interaction: discord.Interaction) -> Sender:
        who = interaction.user
        return Sender(str(who.id), name=who.display_name, username=who.name, is_bot=who.bot)

    async def run_command(self, interaction: discord.Interaction, text: str, ephemeral: bool) -> None:
        """A slash command: halo gets the text command it stands for; its reply comes back
        through `send`, which answers the interaction (deferred now: halo may take a while)."""
        await interaction.response.defer(ephemeral=ephemeral, thinking=True)
        chat_id, kind = self._where(interaction)
        incoming = Incoming("discord", chat_id, kind, self._sender(interaction), text, addressed=True)
        self._asked[incoming.id] = (interaction, ephemeral)
        try:
            async with self._in_order.setdefault(int(interaction.channel_id or 0), asyncio.Lock()):
                await self.inbound.receive(incoming)
                self._handled += 1
        finally:
            self._asked.pop(incoming.id, None)

    async def suggest(
        self, interaction: discord.Interaction, what: Literal["project", "task"], typed: str
    ) -> Sequence[tuple[str, str]]:
        chat_id, _ = self._where(interaction)
        return await self.directory.suggest("discord", chat_id, what, typed)

    async def on_press(self, interaction: discord.Interaction) -> None:
        """A button under one of halo's messages: halo decides; the presser gets a short note
        only they see, and a decided ask's buttons go from the message."""
        data: dict[str, Any] = dict(interaction.data or {})
        custom_id = data.get("custom_id")
        if not isinstance(custom_id, str) or interaction.user.bot:
            return
        await interaction.response.defer(ephemeral=True, thinking=True)
        chat_id, kind = self._where(interaction)
        message_id = str(interaction.message.id) if interaction.message else None
        pressed = await self.inbound.press(
            Press("discord", chat_id, kind, self._sender(interaction), custom_id, message_id=message_id)
        )
        try:
            await interaction.followup.send(pressed.answer[:2000], ephemeral=True)
            if pressed.closed:
                await self._close_offer(custom_id, interaction.message)
        except (discord.HTTPException, aiohttp.ClientError) as exc:  # chrome: the decision is made already
            log.info("answering a Discord button press failed: %s", exc)

    # --- outbound ----------------------------------------------------------------------

    async def send(self, message: Outbound) -> None:
        """Deliver one message to a work channel or a DM, in parts of 2,000 characters."""
        client = self.client
        if client is None or client.is_closed() or not client.is_ready():
            raise SendFailed("Discord is not connected")
        platform, _, chat = message.scope_id.partition(":")
        if platform != "discord" or not chat.lstrip("-").isdigit():
            raise SendFailed(f"{message.scope_id} is not a Discord scope", permanent=True)
        asked = self._asked.get(message.in_reply_to_envelope or "") if message.kind == "reply" else None
        if asked is not None:  # a slash command's answer
            await self._answer(asked[0], message, ephemeral=asked[1])
            return
        scope = self.directory.scope("discord", chat)
        is_dm = scope.type == "dm" and int(chat) not in self._guild_channels
        channel = await self._channel_for(client, int(chat), is_dm=is_dm)
        typing = self._typing.get(getattr(channel, "id", int(chat)))
        if typing is not None:
            await typing.stop()
        await self._deliver(channel, message)

    async def _channel_for(self, client: discord.Client, chat_id: int, *, is_dm: bool) -> discord.abc.Messageable:
        if not is_dm:
            return client.get_partial_messageable(chat_id)
        if chat_id not in self._dm_channels:
            try:
                self._dm_channels[chat_id] = await client.create_dm(discord.Object(id=chat_id))
            except (discord.Forbidden, discord.NotFound) as exc:
                raise SendFailed(f"cannot open a DM with {chat_id}: {exc.text}", permanent=True) from None
            except (discord.HTTPException, aiohttp.ClientError, OSError) as exc:
                raise SendFailed(f"cannot open a DM with {chat_id}: {type(exc).__name__}") from None
        return self._dm_channels[chat_id]

    async def _deliver(
        self, channel: discord.abc.Messageable, message: Outbound, reply_to: discord.Message | None = None
    ) -> None:
        parts = split_message(message.text)
        done = self._parts_sent.get(message.id, 0)  # a retry does not repeat parts that went out
        reference: discord.MessageReference | discord.Message | None = reply_to
        if reference is None and message.reply_to and message.reply_to.isdigit():
            reference = discord.MessageReference(
                message_id=int(message.reply_to), channel_id=getattr(channel, "id", 0), fail_if_not_exists=False
            )
        for index in range(done, len(parts)):
            view = _buttons(message.choices) if index == len(parts) - 1 else None
            extra: dict[str, Any] = {"view": view} if view is not None else {}
            try:
                if index == 0 and reference is not None:
                    sent = await channel.send(parts[index], reference=reference, mention_author=False, **extra)
                else:
                    sent = await channel.send(parts[index], **extra)
            except (discord.Forbidden, discord.NotFound) as exc:
                self._parts_sent.pop(message.id, None)
                raise SendFailed(f"Discord refused the message: {exc.status} {exc.text}", permanent=True) from None
            except (TimeoutError, discord.HTTPException, aiohttp.ClientError, OSError) as exc:
                detail = f"{exc.status} {exc.text}" if isinstance(exc, discord.HTTPException) else type(exc).__name__
                raise SendFailed(f"sending to Discord failed: {detail}") from None
            self._parts_sent[message.id] = index + 1
            if view is not None:
                self._offered.sent(message.choices, sent.channel.id, sent.id)
        self._parts_sent.pop(message.id, None)

    async def _close_offer(self, custom_id: str, pressed: discord.Message | None) -> None:
        """A decided ask's buttons go from the pressed message and from every other copy this
        process sent (each parent's DM had one). A copy sent before a restart keeps them until it
        is pressed, and then says the ask is decided."""
        if pressed is not None:
            await pressed.edit(view=None)
        client = self.client
        for channel_id, message_id in self._offered.decided(custom_id):
            if client is None or (pressed is not None and message_id == pressed.id):
                continue
            try:
                await client.get_partial_messageable(channel_id).get_partial_message(message_id).edit(view=None)
            except (discord.HTTPException, aiohttp.ClientError) as exc:  # chrome: the ask is decided already
                log.info("removing a decided ask's buttons on Discord failed: %s", exc)

    async def _answer(self, interaction: discord.Interaction, message: Outbound, *, ephemeral: bool) -> None:
        """A slash command's reply, as the interaction's follow-up (the deferred "thinking…")."""
        parts = split_message(message.text)
        done = self._parts_sent.get(message.id, 0)
        for index in range(done, len(parts)):
            view = _buttons(message.choices) if index == len(parts) - 1 else None
            extra: dict[str, Any] = {"view": view} if view is not None else {}
            try:
                await interaction.followup.send(parts[index], ephemeral=ephemeral, **extra)
            except (discord.Forbidden, discord.NotFound) as exc:  # the interaction's 15 minutes are over
                self._parts_sent.pop(message.id, None)
                raise SendFailed(f"Discord refused the answer: {exc.status} {exc.text}", permanent=True) from None
            except (TimeoutError, discord.HTTPException, aiohttp.ClientError, OSError) as exc:
                raise SendFailed(f"answering on Discord failed: {type(exc).__name__}") from None
            self._parts_sent[message.id] = index + 1
        self._parts_sent.pop(message.id, None)


def _buttons(choices: tuple[Choice, ...]) -> discord.ui.View | None:
    """A message's buttons; each press reaches `on_interaction` by its opaque id. The view is
    stopped before it is sent, so discord.py keeps no callback of its own for it."""
    if not choices:
        return None
    view = discord.ui.View(timeout=None)
    for choice in choices:
        view.add_item(
            discord.ui.Button(label=choice.label[:80], custom_id=choice.id, style=discord.ButtonStyle.secondary)
        )
    view.stop()
    return view


def _voice_note(message: discord.Message) -> VoiceNote | None:
    """A voice message or audio file, fetched from Discord's CDN only when halo asks for it."""
    for attachment in message.attachments:
        if (attachment.content_type or "").startswith("audio/"):
            seconds = attachment.duration
            return VoiceNote(
                attachment.read,
                mime=attachment.content_type or "audio/ogg",
                size=attachment.size,
                duration=int(seconds) if seconds is not None else None,
            )
    return None


def _attachment(message: discord.Message) -> Attachment | None:
    """The first picture or document of a message (its sounds are voice notes), fetched from
    Discord's CDN only when halo asks for it."""
    for attachment in message.attachments:
        mime = (attachment.content_type or "application/octet-stream").split(";")[0]
        if not mime.startswith("audio/"):
            return Attachment(attachment.read, attachment_kind(mime), mime, attachment.filename, attachment.size)
    return None
