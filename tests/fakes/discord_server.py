"""A local stand-in for Discord that the real discord.py client talks to in tests.

REST under `/api/v10` (`GET /users/@me`, `GET /oauth2/applications/@me`, `GET /gateway/bot`,
`POST /channels/{id}/messages`, `POST /channels/{id}/typing`, `POST /users/@me/channels`),
every JSON answer with `Content-Type: application/json` exactly, as discord.py requires; a
gateway websocket at `/gateway` speaking the real protocol: HELLO, IDENTIFY → READY and
GUILD_CREATE, heartbeats and their ACKs, dispatches with sequence numbers, RECONNECT, and
RESUME (replaying the events after the sequence the client names, then RESUMED).

Tests post messages as people with `say` / `dm`, force a reconnect with `reconnect`, make
sends fail with `fail_sends`, and wait for what the bot sent with `wait_sent`. Every REST
call is recorded.

Interactions, as Discord sends them: `slash` (a slash command, type 2), `autocomplete`
(type 4) and `click` (a button, type 3) dispatch INTERACTION_CREATE; the bot's callbacks
(`POST /interactions/{id}/{token}/callback`), follow-ups (`POST /webhooks/{app}/{token}`),
message edits (`PATCH /channels/{id}/messages/{id}`) and guild command registrations
(`PUT /applications/{app}/guilds/{guild}/commands`) are served and kept.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Self

from aiohttp import WSMsgType, web

from tests.waiting import eventually

JSON = dict[str, Any]

TOKEN = "MTAwMDAwMDAwMDAwMDAwMDAw.fake.discord-token-for-tests-only"
BOT_ID = 9000
GUILD_ID = 7000
API = "/api/v10"

# gateway opcodes
DISPATCH, HEARTBEAT, IDENTIFY, RESUME, RECONNECT, INVALID_SESSION, HELLO, HEARTBEAT_ACK = 0, 1, 2, 6, 7, 9, 10, 11


@dataclass(frozen=True, slots=True)
class RestCall:
    method: str
    path: str
    body: Any
    at: float  # time.monotonic()
    status: int


def user(user_id: int, name: str, *, bot: bool = False) -> JSON:
    return {
        "id": str(user_id),
        "username": name.lower(),
        "global_name": name,
        "discriminator": "0",
        "avatar": None,
        "bot": bot,
    }


BOT_USER = user(BOT_ID, "halo", bot=True)


def _json(payload: Any, status: int = 200) -> web.Response:
    return web.Response(body=json.dumps(payload).encode(), status=status, headers={"Content-Type": "application/json"})


class _Session:
    """One gateway session: its id, the events dispatched in it, and its live socket."""

    def __init__(self, session_id: str) -> None:
        self.id = session_id
        self.events: list[JSON] = []  # every dispatch, with "s"
        self.ws: web.WebSocketResponse | None = None

    def next_seq(self) -> int:
        return len(self.events) + 1


class FakeDiscord:
    def __init__(self, *, channels: tuple[int, ...] = (3001, 3002)) -> None:
        self.channels = channels
        self.calls: list[RestCall] = []
        self.identifies = 0
        self.resumes = 0
        self.heartbeats = 0
        self._ids = itertools.count(10_000_000)
        self._sessions: dict[str, _Session] = {}
        self._current: _Session | None = None
        self._dm_channels: dict[int, int] = {}  # user id → DM channel id
        self._users: dict[int, JSON] = {}
        self._messages: dict[int, JSON] = {}
        self._failures: list[tuple[int, JSON]] = []
        self._replay_from_start = False
        self.last_message_id: int | None = None
        self.files: dict[int, bytes] = {}  # attachment id -> bytes (voice messages)
        self.downloads: list[int] = []  # attachment ids fetched
        self._content_types: dict[int, str] = {}
        self.intents = 0
        self.guild_commands: dict[int, list[JSON]] = {}  # guild id → the registered slash commands
        self.callbacks: dict[str, list[JSON]] = {}  # interaction id → the bot's callback bodies
        self.follow_ups: dict[str, list[JSON]] = {}  # interaction token → follow-up messages
        self._tokens: dict[str, str] = {}  # interaction id → its token
        self._token_channels: dict[str, int] = {}  # interaction token → the channel it came from
        self._runner: web.AppRunner | None = None
        self._port: int | None = None
        self.connected = asyncio.Event()

    # --- lifecycle -----------------------------------------------------------------------

    async def __aenter__(self) -> Self:
        app = web.Application()
        app.add_routes(
            [
                web.get("/gateway", self._gateway),
                web.get(f"{API}/users/@me", self._me),
                web.get(f"{API}/oauth2/applications/@me", self._application),
                web.get(f"{API}/gateway/bot", self._gateway_bot),
                web.post(f"{API}/channels/{{channel_id}}/messages", self._create_message),
                web.post(f"{API}/channels/{{channel_id}}/typing", self._typing),
                web.post(f"{API}/users/@me/channels", self._create_dm),
                web.put(f"{API}/applications/{{app}}/guilds/{{guild}}/commands", self._put_commands),
                web.post(f"{API}/interactions/{{interaction_id}}/{{token}}/callback", self._callback),
                web.post(f"{API}/webhooks/{{app}}/{{token}}", self._follow_up),
                web.patch(f"{API}/channels/{{channel_id}}/messages/{{message_id}}", self._edit_message),
                web.get("/attachments/{attachment_id}/{name}", self._attachment),
            ]
        )
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self._port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        return self

    async def __aexit__(self, *exc: object) -> None:
        for session in self._sessions.values():
            if session.ws is not None and not session.ws.closed:
                await session.ws.close()
        if self._runner is not None:
            await self._runner.cleanup()

    @property
    def api_base_url(self) -> str:
        return f"http://127.0.0.1:{self._port}{API}"

    @property
    def gateway_url(self) -> str:
        return f"ws://127.0.0.1:{self._port}/gateway"

    # --- what tests do -------------------------------------------------------------------

    def person(self, user_id: int, name: str, *, bot: bool = False) -> JSON:
        self._users[user_id] = user(user_id, name, bot=bot)
        return self._users[user_id]

    def dm_channel(self, user_id: int) -> int:
        return self._dm_channels.setdefault(user_id, next(self._ids))

    async def say(
        self,
        channel_id: int,
        author: JSON,
        content: str,
        *,
        mention_bot: bool = False,
        reply_to: int | None = None,
    ) -> int:
        """A message in a guild channel; returns its id."""
        if mention_bot:
            content = f"<@{BOT_ID}> {content}"
        return await self._post(channel_id, author, content, guild=True, reply_to=reply_to)

    async def dm(
        self,
        author: JSON,
        content: str,
        *,
        audio: bytes | None = None,
        duration: float = 3.0,
        files: Sequence[tuple[str, str, bytes]] = (),
    ) -> int:
        """A direct message from `author` to the bot, with a voice message when `audio` is given and
        `files` ((name, content type, bytes)) as attachments, served from the stand-in's CDN path as
        Discord serves them; returns its id."""
        attachments = [self._attachment_for("voice-message.ogg", "audio/ogg", audio)] if audio is not None else []
        if audio is not None:
            attachments[0]["duration_secs"] = duration
        attachments += [self._attachment_for(*file) for file in files]
        return await self._post(
            self.dm_channel(int(author["id"])), author, content, guild=False, attachments=attachments
        )

    def _attachment_for(self, filename: str, content_type: str, data: bytes) -> JSON:
        attachment_id = next(self._ids)
        self.files[attachment_id] = data
        self._content_types[attachment_id] = content_type
        url = f"http://127.0.0.1:{self._port}/attachments/{attachment_id}/{filename}"
        return {
            "id": str(attachment_id),
            "filename": filename,
            "size": len(data),
            "url": url,
            "proxy_url": url,
            "content_type": content_type,
        }

    async def _attachment(self, request: web.Request) -> web.Response:
        attachment_id = int(request.match_info["attachment_id"])
        self.downloads.append(attachment_id)
        if attachment_id not in self.files:
            return web.Response(status=404)
        return web.Response(body=self.files[attachment_id], content_type=self._content_types[attachment_id])

    async def dispatch_message(self, message: JSON) -> None:
        """Dispatch a MESSAGE_CREATE exactly as given (the fuzz tests shape odd ones)."""
        await self._dispatch("MESSAGE_CREATE", message)

    async def redeliver(self, message_id: int) -> None:
        """Dispatch a message again, as Discord may after a reconnect."""
        await self._dispatch("MESSAGE_CREATE", self._messages[message_id])

    async def reconnect(self, *, replay_from_start: bool = False) -> None:
        """Ask the client to reconnect (op 7); it resumes. `replay_from_start`: the RESUME
        replays the whole session, including events the client had already seen."""
        self._replay_from_start = replay_from_start
        session = self._current
        assert session is not None and session.ws is not None
        resumes = self.resumes
        await session.ws.send_json({"op": RECONNECT, "d": None})
        await eventually(lambda: self.resumes > resumes, what="the client to resume")

    def fail_sends(self, status: int, times: int = 1, message: str = "Missing Access", code: int = 50001) -> None:
        """The next `times` message posts fail with this HTTP status."""
        self._failures += [(status, {"message": message, "code": code})] * times

    def sent(self, channel_id: int) -> list[JSON]:
        """Messages the bot posted in a channel, oldest first."""
        return [
            c.body | {"id": c.body.get("_id")}
            for c in self.calls
            if c.method == "POST" and c.path == f"{API}/channels/{channel_id}/messages" and c.status == 200
        ]

    def texts(self, channel_id: int) -> list[str]:
        return [m["content"] for m in self.sent(channel_id)]

    def typing(self, channel_id: int) -> list[RestCall]:
        return [c for c in self.calls if c.path == f"{API}/channels/{channel_id}/typing"]

    async def wait_sent(self, channel_id: int, count: int = 1, what: str = "") -> list[str]:
        await eventually(
            lambda: len(self.texts(channel_id)) >= count, what=what or f"{count} message(s) in {channel_id}"
        )
        return self.texts(channel_id)

    async def wait_connected(self) -> None:
        await eventually(lambda: self._current is not None and self._current.ws is not None, what="a gateway session")

    # --- interactions --------------------------------------------------------------------

    def _interaction(self, kind: int, channel_id: int, person: JSON, data: JSON, message: JSON | None = None) -> JSON:
        interaction_id = str(next(self._ids))
        token = f"token-{interaction_id}"
        self._tokens[interaction_id] = token
        self._token_channels[token] = channel_id
        payload: JSON = {
            "id": interaction_id,
            "application_id": str(BOT_ID),
            "type": kind,
            "token": token,
            "version": 1,
            "channel_id": str(channel_id),
            "data": data,
            "locale": "en-US",
            "app_permissions": "2248473465835073",
            "entitlements": [],
            "authorizing_integration_owners": {},
            "attachment_size_limit": 10 * 1024 * 1024,
        }
        if channel_id in self.channels:
            payload["guild_id"] = str(GUILD_ID)
            payload["guild_locale"] = "en-US"
            payload["member"] = {
                "user": person,
                "roles": [],
                "joined_at": datetime.now(UTC).isoformat(),
                "deaf": False,
                "mute": False,
                "flags": 0,
                "permissions": "2248473465835073",
            }
            payload["channel"] = {
                "id": str(channel_id),
                "type": 0,
                "guild_id": str(GUILD_ID),
                "name": f"channel-{channel_id}",
            }
        else:
            payload["user"] = person
            payload["channel"] = {"id": str(channel_id), "type": 1}
        if message is not None:
            payload["message"] = message
        return payload

    def _command_data(self, name: str, options: list[JSON]) -> JSON:
        commands = self.guild_commands.get(GUILD_ID, [])
        [command] = [c for c in commands if c["name"] == name]
        return {"id": command["id"], "name": name, "type": 1, "guild_id": str(GUILD_ID), "options": options}

    async def slash(self, channel_id: int, person: JSON, name: str, options: list[JSON]) -> str:
        """Someone runs a registered slash command (`options` as Discord sends them, a
        subcommand as `{"type": 1, "name": …, "options": […]}`); returns the interaction id."""
        payload = self._interaction(2, channel_id, person, self._command_data(name, options))
        await self._dispatch("INTERACTION_CREATE", payload)
        return str(payload["id"])

    async def autocomplete(self, channel_id: int, person: JSON, name: str, options: list[JSON]) -> list[JSON]:
        """Someone types into an option marked `"focused": true`; returns the choices offered."""
        payload = self._interaction(4, channel_id, person, self._command_data(name, options))
        await self._dispatch("INTERACTION_CREATE", payload)
        interaction_id = str(payload["id"])
        await eventually(lambda: interaction_id in self.callbacks, what="the autocomplete answer")
        [answer] = self.callbacks[interaction_id]
        assert answer["type"] == 8, answer
        return list(answer["data"]["choices"])

    async def click(self, person: JSON, message: JSON, label: str) -> str:
        """Someone presses the button `label` under a message the bot sent (as `message` shows
        it: a client may still show buttons that are gone); returns the interaction id."""
        stored = self._messages[int(message["id"])]
        rows = message.get("components") or stored.get("components", [])  # as the presser's client still shows it
        [custom_id] = [b["custom_id"] for row in rows for b in row["components"] if b.get("label") == label]
        data = {"custom_id": custom_id, "component_type": 2}
        payload = self._interaction(3, int(stored["channel_id"]), person, data, message=stored)
        await self._dispatch("INTERACTION_CREATE", payload)
        return str(payload["id"])

    def buttons(self, message: JSON) -> list[str]:
        """The labels under a message the bot sent, as it is now (edits applied)."""
        stored = self._messages[int(message["id"])]
        return [b.get("label", "") for row in stored.get("components", []) for b in row["components"]]

    def answers(self, interaction_id: str) -> list[JSON]:
        """What the bot said for an interaction: its follow-up messages."""
        return self.follow_ups.get(self._tokens[interaction_id], [])

    async def wait_answer(self, interaction_id: str) -> JSON:
        await eventually(lambda: self.answers(interaction_id), what=f"an answer to interaction {interaction_id}")
        return self.answers(interaction_id)[0]

    async def _put_commands(self, request: web.Request) -> web.Response:
        body = await self._record(request)
        guild = int(request.match_info["guild"])
        registered = [
            {**c, "id": str(next(self._ids)), "application_id": str(BOT_ID), "guild_id": str(guild), "version": "1"}
            for c in body
        ]
        self.guild_commands[guild] = registered
        return _json(registered)

    async def _callback(self, request: web.Request) -> web.Response:
        body = await self._record(request)
        interaction_id = request.match_info["interaction_id"]
        if self._tokens.get(interaction_id) != request.match_info["token"]:
            return _json({"message": "Unknown interaction", "code": 10062}, 404)
        self.callbacks.setdefault(interaction_id, []).append(body)
        ephemeral = bool((body.get("data") or {}).get("flags", 0) & 64)
        return _json(
            {
                "interaction": {
                    "id": interaction_id,
                    "type": 2,
                    "response_message_loading": body.get("type") == 5,
                    "response_message_ephemeral": ephemeral,
                }
            }
        )

    async def _follow_up(self, request: web.Request) -> web.Response:
        body = await self._record(request)
        token = request.match_info["token"]
        message_id = next(self._ids)
        channel_id = self._token_channels.get(token, 0)
        message = self._bot_message(message_id, channel_id, body)
        if channel_id in self.channels:
            message["guild_id"] = str(GUILD_ID)
        self.follow_ups.setdefault(token, []).append(message)
        self._messages[message_id] = message
        return _json(message)

    async def _edit_message(self, request: web.Request) -> web.Response:
        body = await self._record(request)
        message = self._messages.get(int(request.match_info["message_id"]))
        if message is None:
            return _json({"message": "Unknown Message", "code": 10008}, 404)
        if "components" in body:
            message["components"] = body["components"]
        if "content" in body:
            message["content"] = body["content"]
        return _json(message)

    def _bot_message(self, message_id: int, channel_id: int, body: JSON) -> JSON:
        message: JSON = {
            "id": str(message_id),
            "channel_id": str(channel_id),
            "author": BOT_USER,
            "content": body.get("content", ""),
            "timestamp": datetime.now(UTC).isoformat(),
            "edited_timestamp": None,
            "tts": False,
            "mention_everyone": False,
            "mentions": [],
            "mention_roles": [],
            "attachments": [],
            "embeds": [],
            "pinned": False,
            "type": 0,
            "flags": int(body.get("flags") or 0),
        }
        if body.get("components"):
            message["components"] = body["components"]
        return message

    # --- gateway -------------------------------------------------------------------------

    async def _post(
        self,
        channel_id: int,
        author: JSON,
        content: str,
        *,
        guild: bool,
        reply_to: int | None = None,
        attachments: list[JSON] | None = None,
    ) -> int:
        message_id = next(self._ids)
        mentions = [BOT_USER] if f"<@{BOT_ID}>" in content else []
        message: JSON = {
            "id": str(message_id),
            "channel_id": str(channel_id),
            "author": author,
            "content": content,
            "timestamp": datetime.now(UTC).isoformat(),
            "edited_timestamp": None,
            "tts": False,
            "mention_everyone": False,
            "mentions": mentions,
            "mention_roles": [],
            "attachments": attachments or [],
            "embeds": [],
            "pinned": False,
            "type": 0,
        }
        if guild:
            message["guild_id"] = str(GUILD_ID)
        if reply_to is not None:
            message["type"] = 19
            message["message_reference"] = {"message_id": str(reply_to), "channel_id": str(channel_id)}
            referenced = self._messages.get(reply_to)
            if referenced is not None:
                message["referenced_message"] = referenced
                if referenced["author"]["id"] == str(BOT_ID):
                    message["mentions"] = [BOT_USER]
        self._messages[message_id] = message
        self.last_message_id = message_id
        await self._dispatch("MESSAGE_CREATE", message)
        return message_id

    async def _dispatch(self, event: str, data: JSON) -> None:
        await self.wait_connected()
        session = self._current
        assert session is not None
        payload = {"op": DISPATCH, "t": event, "s": session.next_seq(), "d": data}
        session.events.append(payload)
        if session.ws is not None and not session.ws.closed:
            await session.ws.send_json(payload)

    async def _gateway(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        await ws.send_json({"op": HELLO, "d": {"heartbeat_interval": 41250}})
        session: _Session | None = None
        async for msg in ws:
            if msg.type != WSMsgType.TEXT:
                break
            frame = json.loads(msg.data)
            op, data = frame.get("op"), frame.get("d")
            if op == HEARTBEAT:
                self.heartbeats += 1
                await ws.send_json({"op": HEARTBEAT_ACK})
            elif op == IDENTIFY:
                session = await self._identify(ws, data)
            elif op == RESUME:
                session = await self._resume(ws, data)
        if session is not None and session.ws is ws:
            session.ws = None
        return ws

    async def _identify(self, ws: web.WebSocketResponse, data: JSON) -> _Session:
        assert data["token"] == TOKEN, "IDENTIFY with a wrong token"
        self.identifies += 1
        self.intents = int(data.get("intents", 0))
        session = _Session(f"session-{self.identifies}")
        self._sessions[session.id] = session
        self._current = session
        session.ws = ws
        ready = {
            "v": 10,
            "user": BOT_USER,
            "guilds": [{"id": str(GUILD_ID), "unavailable": True}],
            "session_id": session.id,
            "resume_gateway_url": self.gateway_url,
            "application": {"id": str(BOT_ID), "flags": 0},
        }
        for event, payload in (("READY", ready), ("GUILD_CREATE", self._guild())):
            frame = {"op": DISPATCH, "t": event, "s": session.next_seq(), "d": payload}
            session.events.append(frame)
            await ws.send_json(frame)
        return session

    async def _resume(self, ws: web.WebSocketResponse, data: JSON) -> _Session | None:
        session = self._sessions.get(data.get("session_id", ""))
        if session is None or data.get("token") != TOKEN:
            await ws.send_json({"op": INVALID_SESSION, "d": False})
            return None
        self.resumes += 1
        session.ws = ws
        self._current = session
        after = 0 if self._replay_from_start else int(data.get("seq") or 0)
        self._replay_from_start = False
        for frame in session.events[after:]:
            if frame["t"] not in ("READY", "GUILD_CREATE"):
                await ws.send_json(frame)
        frame = {"op": DISPATCH, "t": "RESUMED", "s": session.next_seq(), "d": {}}
        session.events.append(frame)
        await ws.send_json(frame)
        return session

    def _guild(self) -> JSON:
        return {
            "id": str(GUILD_ID),
            "name": "The Team",
            "icon": None,
            "owner_id": "1",
            "unavailable": False,
            "member_count": 3,
            "large": False,
            "joined_at": datetime.now(UTC).isoformat(),
            "features": [],
            "emojis": [],
            "stickers": [],
            "members": [],
            "presences": [],
            "voice_states": [],
            "threads": [],
            "stage_instances": [],
            "guild_scheduled_events": [],
            "roles": [
                {
                    "id": str(GUILD_ID),
                    "name": "@everyone",
                    "permissions": "68608",
                    "position": 0,
                    "color": 0,
                    "hoist": False,
                    "managed": False,
                    "mentionable": False,
                    "flags": 0,
                }
            ],
            "channels": [
                {
                    "id": str(c),
                    "type": 0,
                    "name": f"channel-{c}",
                    "position": i,
                    "permission_overwrites": [],
                    "nsfw": False,
                    "parent_id": None,
                }
                for i, c in enumerate(self.channels)
            ],
            "premium_tier": 0,
            "mfa_level": 0,
            "verification_level": 0,
            "explicit_content_filter": 0,
            "default_message_notifications": 0,
            "system_channel_flags": 0,
            "afk_timeout": 300,
            "nsfw_level": 0,
            "preferred_locale": "en-US",
            "premium_progress_bar_enabled": False,
        }

    # --- REST ----------------------------------------------------------------------------

    def _authorised(self, request: web.Request) -> bool:
        return request.headers.get("Authorization") == f"Bot {TOKEN}"

    async def _record(self, request: web.Request, status: int = 200) -> Any:
        body = await request.json() if request.can_read_body else None
        self.calls.append(RestCall(request.method, request.path, body, time.monotonic(), status))
        return body

    async def _me(self, request: web.Request) -> web.Response:
        if not self._authorised(request):
            await self._record(request, 401)
            return _json({"message": "401: Unauthorized", "code": 0}, 401)
        await self._record(request)
        return _json(BOT_USER)

    async def _application(self, request: web.Request) -> web.Response:
        await self._record(request)
        return _json(
            {
                "id": str(BOT_ID),
                "name": "halo",
                "description": "",
                "icon": None,
                "bot_public": False,
                "bot_require_code_grant": False,
                "owner": user(1, "owner"),
                "verify_key": "0" * 64,
                "flags": 0,
            }
        )

    async def _gateway_bot(self, request: web.Request) -> web.Response:
        await self._record(request)
        limit = {"total": 1000, "remaining": 999, "reset_after": 0, "max_concurrency": 1}
        return _json({"url": self.gateway_url, "shards": 1, "session_start_limit": limit})

    async def _create_message(self, request: web.Request) -> web.Response:
        channel_id = int(request.match_info["channel_id"])
        if self._failures:
            status, error = self._failures.pop(0)
            await self._record(request, status)
            return _json(error, status)
        body = await self._record(request)
        message_id = next(self._ids)
        body["_id"] = message_id
        message: JSON = {
            "id": str(message_id),
            "channel_id": str(channel_id),
            "author": BOT_USER,
            "content": body.get("content", ""),
            "timestamp": datetime.now(UTC).isoformat(),
            "edited_timestamp": None,
            "tts": False,
            "mention_everyone": False,
            "mentions": [],
            "mention_roles": [],
            "attachments": [],
            "embeds": [],
            "pinned": False,
            "type": 19 if body.get("message_reference") else 0,
        }
        if channel_id in self.channels:
            message["guild_id"] = str(GUILD_ID)
        if body.get("message_reference"):
            message["message_reference"] = body["message_reference"]
        if body.get("components"):
            message["components"] = body["components"]
        self._messages[message_id] = message
        return _json(message)

    async def _typing(self, request: web.Request) -> web.Response:
        await self._record(request, 204)
        return web.Response(status=204)

    async def _create_dm(self, request: web.Request) -> web.Response:
        body = await self._record(request)
        recipient = int(body["recipient_id"])
        person = self._users.get(recipient, user(recipient, f"user{recipient}"))
        return _json(
            {"id": str(self.dm_channel(recipient)), "type": 1, "recipients": [person], "last_message_id": None}
        )
