"""A local Telegram Bot API that the real python-telegram-bot talks to in tests.

It answers `/bot<token>/<method>` on 127.0.0.1 the way Telegram does: getUpdates long-polls
the queued updates and forgets those below the `offset` it is given (so an update that was
never confirmed is delivered again, as after a crash), sendMessage returns a Message, and
errors carry `error_code`, `description` and, for 429, `parameters.retry_after`. Every call
is recorded. Tests queue updates with `message`/`join`/`leave`, a button press with `press`,
script failures with `fail` or `unreachable`, and wait for what halo sent with `wait_sent`.
sendMessageDraft (private chats only, as Telegram), answerCallbackQuery,
editMessageReplyMarkup, setMyCommands (kept per scope) and setMessageReaction are served too.
"""

from __future__ import annotations

import asyncio
import contextvars
import itertools
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from html.parser import HTMLParser
from typing import Any, Self

from aiohttp import web

from tests.waiting import DEFAULT_WITHIN, eventually

JSON = dict[str, Any]

TOKEN = "123456789:AAHfakeTokenForTestsOnly-abcdefghijk"
BOT_ID = 999
BOT_USERNAME = "halo_family_bot"

# Parameters PTB sends as plain strings; every other form value is JSON-encoded.
_STRING_PARAMS = frozenset({"text", "parse_mode", "action", "url", "secret_token", "description", "caption"})


@dataclass(frozen=True, slots=True)
class BotCall:
    method: str
    params: JSON
    at: float  # time.monotonic() when it arrived
    ok: bool  # whether it was answered with success
    caller: str = field(default_factory=lambda: _CALLER.get())  # whose base URL (`base_url_for`) it came by


_CALLER: contextvars.ContextVar[str] = contextvars.ContextVar("caller", default="")


@dataclass(slots=True)
class _Failure:
    method: str
    code: int
    description: str
    retry_after: int | None
    times: int
    after: int = 0  # calls that still succeed before the failures start


@dataclass(slots=True)
class _Chat:
    id: int
    type: str
    title: str | None = None
    members: dict[int, str] = field(default_factory=dict)  # user id → status


class FakeTelegram:
    def __init__(
        self, token: str = TOKEN, *, bot_id: int = BOT_ID, bot_username: str = BOT_USERNAME, port: int = 0
    ) -> None:
        self.token = token
        self.bot = {"id": bot_id, "is_bot": True, "first_name": "halo", "username": bot_username}
        self.calls: list[BotCall] = []
        self.unreachable: set[str] = set()  # methods whose connections are dropped
        self.webhook: JSON | None = None
        self._pending: list[JSON] = []
        self._arrived = asyncio.Event()
        self._failures: list[_Failure] = []
        self.files: dict[str, bytes] = {}  # file_id -> bytes, served by getFile and /file/
        self.downloads: list[str] = []  # file ids downloaded
        self._update_ids = itertools.count(1)
        self._message_ids = itertools.count(1)
        self._chats: dict[int, _Chat] = {}
        self.bot_messages: dict[int, JSON] = {}  # message id → what halo sent (its buttons are edited here)
        self.commands: dict[str, list[JSON]] = {}  # setMyCommands: scope (as JSON text) → commands
        self.reactions: dict[tuple[int, int], list[JSON]] = {}  # (chat, message) → the bot's reaction
        self._runner: web.AppRunner | None = None
        self._port = port

    # --- lifecycle -----------------------------------------------------------------------

    @property
    def port(self) -> int:
        return self._port

    @property
    def base_url(self) -> str:
        """What goes in `telegram.base_url` (PTB appends the token)."""
        return f"http://127.0.0.1:{self._port}/bot"

    def base_url_for(self, caller: str) -> str:
        """The same Bot API under `/<caller>/`: each call records who made it (two processes
        polling one bot, say)."""
        return f"http://127.0.0.1:{self._port}/{caller}/bot"

    async def start(self) -> Self:
        app = web.Application()
        app.router.add_route("*", "/bot{token}/{method}", self._serve)
        app.router.add_route("*", "/{caller}/bot{token}/{method}", self._serve)
        app.router.add_get("/file/bot{token}/{path:.+}", self._file)
        self._runner = web.AppRunner(app, shutdown_timeout=0.2, handler_cancellation=True, access_log=None)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", self._port).start()
        self._port = self._runner.addresses[0][1]
        return self

    async def close(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
        self._runner = None

    async def __aenter__(self) -> Self:
        return await self.start()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    # --- updates -------------------------------------------------------------------------

    def push(self, update: JSON) -> JSON:
        """Queue an update (an `update_id` is assigned when missing) for the next getUpdates."""
        update.setdefault("update_id", next(self._update_ids))
        self._pending.append(update)
        self._pending.sort(key=lambda u: u["update_id"])
        self._arrived.set()
        return update

    def redeliver(self, update: JSON) -> JSON:
        """Queue an update that was already delivered, as Telegram does when it was not confirmed."""
        return self.push(dict(update))

    def user(self, user_id: int, first_name: str = "", username: str | None = None, is_bot: bool = False) -> JSON:
        user: JSON = {"id": user_id, "is_bot": is_bot, "first_name": first_name or f"User{user_id}"}
        if username:
            user["username"] = username
        return user

    def chat(self, chat_id: int, title: str | None = None) -> JSON:
        chat = self._chats.get(chat_id)
        if chat is None:
            kind = "private" if chat_id > 0 else "supergroup"
            chat = self._chats[chat_id] = _Chat(chat_id, kind, title or (None if chat_id > 0 else "Family chat"))
        data: JSON = {"id": chat.id, "type": chat.type}
        if chat.title:
            data["title"] = chat.title
        return data

    def message(
        self,
        chat_id: int,
        sender: int | JSON,
        text: str,
        *,
        mention: bool = False,
        reply_to: JSON | None = None,
        entities: list[JSON] | None = None,
        **extra: Any,
    ) -> JSON:
        """Queue a text message from `sender` (a user id or a `user(...)` dict) in `chat_id`.
        `mention=True` prefixes `@<bot username> ` with its entity, as Telegram clients do."""
        from_user = sender if isinstance(sender, dict) else self.user(sender)
        entities = list(entities or [])
        if mention:
            handle = f"@{self.bot['username']}"
            text = f"{handle} {text}"
            entities.insert(0, {"type": "mention", "offset": 0, "length": len(handle)})
        if text.startswith("/"):
            command = text.split()[0]
            entities.insert(0, {"type": "bot_command", "offset": 0, "length": len(command)})
        message = self._message(chat_id, from_user, text=text, **extra)
        if entities:
            message["entities"] = entities
        if reply_to is not None:
            message["reply_to_message"] = reply_to
        self._chats[chat_id].members.setdefault(from_user["id"], "member")
        return self.push({"message": message})

    def press(self, sender: int | JSON, sent: JSON, label: str, *, seen: JSON | None = None) -> JSON:
        """Queue a `callback_query`: `sender` pressed the button `label` under `sent` (a message
        halo sent, from `sent_with_buttons`), with that button's data as Telegram hands it back.
        `seen`: the keyboard as a client that has not caught up with an edit still shows it."""
        from_user = sender if isinstance(sender, dict) else self.user(sender)
        message = {k: v for k, v in self.bot_messages[sent["message_id"]].items() if k != "had_buttons"}
        rows = (seen if seen is not None else message.get("reply_markup", {})).get("inline_keyboard", [])
        [data] = [b["callback_data"] for row in rows for b in row if b["text"] == label]
        query = {
            "id": str(next(self._update_ids) * 1000),
            "from": from_user,
            "message": message,
            "chat_instance": str(message["chat"]["id"]),
            "data": data,
        }
        return self.push({"callback_query": query})

    def buttons(self, sent: JSON) -> list[str]:
        """The labels under a message halo sent, as they are now (edits applied)."""
        rows = self.bot_messages[sent["message_id"]].get("reply_markup", {}).get("inline_keyboard", [])
        return [b["text"] for row in rows for b in row]

    def sent_with_buttons(self, chat_id: int) -> list[JSON]:
        """Messages halo sent to `chat_id` that came with buttons, oldest first."""
        return [m for m in self.bot_messages.values() if m["chat"]["id"] == chat_id and m.get("had_buttons")]

    def answers(self) -> list[str]:
        """What each answerCallbackQuery said, in order."""
        return [c.params.get("text", "") for c in self.calls_to("answerCallbackQuery") if c.ok]

    def drafts(self, chat_id: int) -> list[str]:
        """The texts of every sendMessageDraft that succeeded in `chat_id`, in order."""
        return [
            c.params["text"]
            for c in self.calls
            if c.method == "sendMessageDraft" and c.ok and c.params["chat_id"] == chat_id
        ]

    def join(self, chat_id: int, *users: JSON, by: int | None = None) -> JSON:
        """Queue a `new_chat_members` service message."""
        adder = self.user(by) if by is not None else users[0]
        for user in users:
            self.chat(chat_id)
            self._chats[chat_id].members[user["id"]] = "member"
        return self.push({"message": self._message(chat_id, adder, new_chat_members=list(users))})

    def leave(self, chat_id: int, user: JSON) -> JSON:
        """Queue a `left_chat_member` service message; getChatMember then says "left"."""
        self.chat(chat_id)
        self._chats[chat_id].members[user["id"]] = "left"
        return self.push({"message": self._message(chat_id, user, left_chat_member=user)})

    def _message(self, chat_id: int, from_user: JSON, **fields: Any) -> JSON:
        return {
            "message_id": next(self._message_ids),
            "date": int(time.time()),
            "chat": self.chat(chat_id),
            "from": from_user,
            **fields,
        }

    def voice(
        self, chat_id: int, sender: int | JSON, audio: bytes, *, duration: int = 3, caption: str | None = None
    ) -> JSON:
        """Queue a voice note from `sender`; its bytes are served through getFile and /file/."""
        note = {**self._file_for("voice", audio), "duration": duration, "mime_type": "audio/ogg"}
        return self._media(chat_id, sender, caption, voice=note)

    def photo(self, chat_id: int, sender: int | JSON, image: bytes, *, caption: str | None = None) -> JSON:
        """Queue a photo, in two sizes as Telegram sends them (a thumbnail and the picture)."""
        sizes = [
            {**self._file_for("thumb", image[:64]), "width": 90, "height": 67},
            {**self._file_for("photo", image), "width": 1280, "height": 960},
        ]
        return self._media(chat_id, sender, caption, photo=sizes)

    def document(
        self, chat_id: int, sender: int | JSON, data: bytes, file_name: str, mime: str, *, caption: str | None = None
    ) -> JSON:
        """Queue a document (a PDF, a text file, an image sent as a file)."""
        document = {**self._file_for("document", data), "file_name": file_name, "mime_type": mime}
        return self._media(chat_id, sender, caption, document=document)

    def _file_for(self, kind: str, data: bytes) -> JSON:
        file_id = f"{kind}-{next(self._message_ids)}"
        self.files[file_id] = data
        return {"file_id": file_id, "file_unique_id": file_id, "file_size": len(data)}

    def _media(self, chat_id: int, sender: int | JSON, caption: str | None, **fields: Any) -> JSON:
        from_user = sender if isinstance(sender, dict) else self.user(sender)
        if caption is not None:
            fields["caption"] = caption
        message = self._message(chat_id, from_user, **fields)
        self._chats[chat_id].members.setdefault(from_user["id"], "member")
        return self.push({"message": message})

    # --- scripting -----------------------------------------------------------------------

    def fail(
        self,
        method: str,
        code: int = 429,
        description: str | None = None,
        *,
        retry_after: int | None = None,
        times: int = 1,
        after: int = 0,
    ) -> None:
        """The next `times` calls of `method` get this error (once `after` more have succeeded)."""
        if code == 429 and retry_after is None:
            retry_after = 1
        text = description or (f"Too Many Requests: retry after {retry_after}" if code == 429 else "Bad Request")
        self._failures.append(_Failure(method, code, text, retry_after, times, after))

    # --- what happened -------------------------------------------------------------------

    def calls_to(self, method: str) -> list[BotCall]:
        return [c for c in self.calls if c.method == method]

    def sent(self, chat_id: int | None = None) -> list[JSON]:
        """Parameters of every sendMessage that succeeded, optionally to one chat."""
        return [
            c.params
            for c in self.calls
            if c.method == "sendMessage" and c.ok and (chat_id is None or c.params["chat_id"] == chat_id)
        ]

    def texts(self, chat_id: int) -> list[str]:
        return [p["text"] for p in self.sent(chat_id)]

    async def wait_for(self, condition: Callable[[], Any], within: float = DEFAULT_WITHIN, what: str = "") -> Any:
        """`tests.waiting.eventually`, and on failure the Bot API methods halo called so far."""
        try:
            return await eventually(condition, within=within, what=what)
        except AssertionError as exc:
            raise AssertionError(f"{exc}; calls: {[c.method for c in self.calls]}") from None

    async def wait_sent(self, chat_id: int, count: int = 1, within: float = DEFAULT_WITHIN) -> list[str]:
        """The texts sent to `chat_id`, once there are at least `count` of them."""
        await self.wait_for(lambda: len(self.sent(chat_id)) >= count, within, f"{count} message(s) to {chat_id}")
        return self.texts(chat_id)

    # --- the API -------------------------------------------------------------------------

    async def _serve(self, request: web.Request) -> web.StreamResponse:
        _CALLER.set(request.match_info.get("caller", ""))  # this request's own task: its calls only
        method = request.match_info["method"]
        params = await _params(request)
        if request.match_info["token"] != self.token:
            self.calls.append(BotCall(method, params, time.monotonic(), ok=False))
            return _error(401, "Unauthorized")
        if method in self.unreachable:
            self.calls.append(BotCall(method, params, time.monotonic(), ok=False))
            if request.transport is not None:
                request.transport.abort()
            return web.Response()
        failure = next((f for f in self._failures if f.method == method), None)
        if failure is not None and failure.after > 0:
            failure.after -= 1
            failure = None
        if failure is not None:
            failure.times -= 1
            if failure.times <= 0:
                self._failures.remove(failure)
            self.calls.append(BotCall(method, params, time.monotonic(), ok=False))
            return _error(failure.code, failure.description, failure.retry_after)
        handler = getattr(self, f"_api_{method}", None)
        if handler is None:
            self.calls.append(BotCall(method, params, time.monotonic(), ok=False))
            return _error(404, "Not Found: method not found")
        arrived = time.monotonic()
        try:
            result = await handler(params)
        except _ApiError as exc:
            self.calls.append(BotCall(method, params, arrived, ok=False))
            return _error(exc.code, exc.description)
        if method == "getUpdates":  # recorded with what it delivered
            params = {**params, "delivered": [u["update_id"] for u in result]}
        self.calls.append(BotCall(method, params, arrived, ok=True))
        return web.json_response({"ok": True, "result": result})

    async def _api_getFile(self, params: JSON) -> JSON:
        file_id = str(params.get("file_id"))
        if file_id not in self.files:
            raise _ApiError(400, "Bad Request: invalid file_id")
        return {
            "file_id": file_id,
            "file_unique_id": file_id,
            "file_size": len(self.files[file_id]),
            "file_path": f"files/{file_id}.bin",
        }

    async def _file(self, request: web.Request) -> web.StreamResponse:
        """Downloads, as the Bot API serves them: /file/bot<token>/<file_path>."""
        if request.match_info["token"] != self.token:
            return web.Response(status=401)
        file_id = request.match_info["path"].removeprefix("files/").removesuffix(".bin")
        self.downloads.append(file_id)
        if file_id not in self.files:
            return web.Response(status=404)
        return web.Response(body=self.files[file_id], content_type="application/octet-stream")

    async def _api_getMe(self, params: JSON) -> JSON:
        return {
            **self.bot,
            "can_join_groups": True,
            "can_read_all_group_messages": True,
            "supports_inline_queries": False,
        }

    async def _api_getUpdates(self, params: JSON) -> list[JSON]:
        offset = int(params.get("offset") or 0)
        if offset:
            self._pending = [u for u in self._pending if u["update_id"] >= offset]
        deadline = time.monotonic() + float(params.get("timeout") or 0)
        while not self._pending and time.monotonic() < deadline:
            self._arrived.clear()
            try:
                await asyncio.wait_for(self._arrived.wait(), deadline - time.monotonic())
            except TimeoutError:
                break
        return self._pending[: int(params.get("limit") or 100)]

    async def _api_deleteWebhook(self, params: JSON) -> bool:
        self.webhook = None
        return True

    async def _api_setWebhook(self, params: JSON) -> bool:
        self.webhook = params
        return True

    async def _api_setMyCommands(self, params: JSON) -> bool:
        scope = params.get("scope") or {"type": "default"}
        self.commands[json.dumps(scope, sort_keys=True)] = list(params.get("commands") or [])
        return True

    def menu(self, scope: JSON) -> list[str]:
        """The command names set for a scope (`{"type": "all_private_chats"}`, `{"type": "chat", "chat_id": …}`)."""
        return [c["command"] for c in self.commands.get(json.dumps(scope, sort_keys=True), [])]

    async def _api_sendMessageDraft(self, params: JSON) -> bool:
        chat_id = int(params["chat_id"])
        if chat_id < 0:
            raise _ApiError(400, "Bad Request: drafts are for private chats")
        if not isinstance(params.get("draft_id"), int) or params["draft_id"] == 0:
            raise _ApiError(400, "Bad Request: draft_id must be a non-zero integer")
        visible_text(params.get("text", ""), params.get("parse_mode"))  # the same parsing as a message
        return True

    async def _api_answerCallbackQuery(self, params: JSON) -> bool:
        return True

    async def _api_editMessageReplyMarkup(self, params: JSON) -> JSON:
        message = self.bot_messages.get(int(params["message_id"]))
        if message is None or message["chat"]["id"] != int(params["chat_id"]):
            raise _ApiError(400, "Bad Request: message to edit not found")
        markup = params.get("reply_markup")
        if not markup or not markup.get("inline_keyboard"):
            message.pop("reply_markup", None)
        else:
            message["reply_markup"] = markup
        return message

    async def _api_setMessageReaction(self, params: JSON) -> bool:
        self.reactions[(int(params["chat_id"]), int(params["message_id"]))] = list(params.get("reaction") or [])
        return True

    async def _api_sendChatAction(self, params: JSON) -> bool:
        return True

    async def _api_sendMessage(self, params: JSON) -> JSON:
        text = params.get("text", "")
        if not visible_text(text, params.get("parse_mode")).strip():
            raise _ApiError(400, "Bad Request: message text is empty")
        if len(visible_text(text, params.get("parse_mode")).encode("utf-16-le")) // 2 > 4096:
            raise _ApiError(400, "Bad Request: message is too long")
        message = self._message(int(params["chat_id"]), self.bot, text=text)
        if params.get("reply_markup"):
            message["reply_markup"] = params["reply_markup"]
            self.bot_messages[message["message_id"]] = {**message, "had_buttons": True}
        else:
            self.bot_messages[message["message_id"]] = message
        return message

    async def _api_getChatMember(self, params: JSON) -> JSON:
        chat = self._chats.get(int(params["chat_id"]))
        user_id = int(params["user_id"])
        status = chat.members.get(user_id, "left") if chat else "left"
        return {"status": status, "user": self.user(user_id)}


class _ApiError(Exception):
    def __init__(self, code: int, description: str) -> None:
        super().__init__(description)
        self.code = code
        self.description = description


_HTML_TAGS = frozenset(
    {
        "b",
        "strong",
        "i",
        "em",
        "u",
        "ins",
        "s",
        "strike",
        "del",
        "code",
        "pre",
        "a",
        "blockquote",
        "tg-spoiler",
        "span",
        "tg-emoji",
    }
)


class _TelegramHTML(HTMLParser):
    """Parses text the way Telegram's HTML mode does, as strictly: unknown or unbalanced tags
    are the "can't parse entities" error a real bot gets."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.open: list[str] = []
        self.visible: list[str] = []

    def handle_starttag(self, tag: str, attrs: Any) -> None:
        if tag not in _HTML_TAGS:
            raise _ApiError(400, f'Bad Request: can\'t parse entities: unsupported start tag "{tag}"')
        self.open.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if not self.open or self.open.pop() != tag:
            raise _ApiError(400, f'Bad Request: can\'t parse entities: unmatched end tag "{tag}"')

    def handle_data(self, data: str) -> None:
        self.visible.append(data)


def visible_text(text: str, parse_mode: str | None) -> str:
    """The text a reader sees, which is what Telegram's length limit counts."""
    if parse_mode is None:
        return text
    if parse_mode != "HTML":
        raise _ApiError(400, f"Bad Request: unsupported parse_mode {parse_mode} in this fake")
    parser = _TelegramHTML()
    parser.feed(text)
    parser.close()
    if parser.open:
        raise _ApiError(400, f'Bad Request: can\'t parse entities: unclosed tag "{parser.open[-1]}"')
    return "".join(parser.visible)


def _error(code: int, description: str, retry_after: int | None = None) -> web.Response:
    body: JSON = {"ok": False, "error_code": code, "description": description}
    if retry_after is not None:
        body["parameters"] = {"retry_after": retry_after}
    return web.json_response(body, status=code)


async def _params(request: web.Request) -> JSON:
    """PTB posts form fields (JSON-encoded unless they are strings) or, at times, a JSON body."""
    if request.content_type == "application/json":
        return dict(await request.json())
    form = await request.post()
    params: JSON = {}
    for key, value in form.items():
        if not isinstance(value, str) or key in _STRING_PARAMS:
            params[key] = value
            continue
        try:
            params[key] = json.loads(value)
        except ValueError:
            params[key] = value
    params.update({k: v for k, v in request.query.items() if k not in params})
    return params
