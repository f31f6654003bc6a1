"""A Telegram message → what it said (`halo.port.Incoming`): chat, sender, text, media, and
whether it is for the bot.

halo resolves the speaker (from `from.id`) and the scope (from `chat.id`, `telegram:<chat id>`).
A group message is addressed to the bot when it mentions the bot, replies to one of its
messages, or is a command meant for it (halo adds: everything in a private chat, and in a
parents group set to `respond_to_all`). Telegram's `/start`, sent when someone opens the
chat, is `/help`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta

from telegram import Document, Message, MessageEntity, PhotoSize, User

from halo.port import Attachment, Incoming, Sender, VoiceNote, attachment_kind, clean_text


@dataclass(frozen=True, slots=True)
class BotIdentity:
    id: int
    username: str


def sender_of(user: User) -> Sender:
    return Sender(str(user.id), name=user.full_name, username=user.username, is_bot=user.is_bot)


def is_for_bot(message: Message, bot: BotIdentity) -> bool:
    """Mentioned (`@name` or a text mention), replied to, or sent a command not meant for another bot."""
    replied = message.reply_to_message
    if replied is not None and replied.from_user is not None and replied.from_user.id == bot.id:
        return True
    kinds = (MessageEntity.MENTION, MessageEntity.TEXT_MENTION, MessageEntity.BOT_COMMAND)
    text, entities = (message.text, message.entities) if message.text else (message.caption, message.caption_entities)
    handle = bot.username.lower()
    for entity in entities:
        if entity.type not in kinds:
            continue
        value = _entity_text(text or "", entity)
        if entity.type == MessageEntity.MENTION and value.lower() == f"@{handle}":
            return True
        if entity.type == MessageEntity.TEXT_MENTION and entity.user is not None and entity.user.id == bot.id:
            return True
        if entity.type == MessageEntity.BOT_COMMAND and entity.offset == 0:
            _, _, target = value.partition("@")
            if not target or target.lower() == handle:
                return True
    return False


def _entity_text(text: str, entity: MessageEntity) -> str:
    """The text an entity covers. Offsets count UTF-16 units; `surrogatepass` lets a lone
    surrogate (which python-telegram-bot's own parse_entities cannot encode) count as one."""
    units = text.encode("utf-16-le", "surrogatepass")
    piece = units[entity.offset * 2 : (entity.offset + entity.length) * 2]
    return clean_text(piece.decode("utf-16-le", "replace"))


def to_incoming(message: Message, bot: BotIdentity) -> Incoming | None:
    """None for what halo does not read: messages without text, and posts with no sender."""
    text = message.text or message.caption or ""
    voice = _voice_note(message)
    attachment = _attachment(message)
    if not isinstance(text, str) or message.from_user is None:
        return None  # a `text` that is not a string: Telegram never sends one, a forger might
    if not text.strip() and voice is None and attachment is None:
        return None
    if message.from_user.is_bot:
        return None  # bots are not members, whatever id they carry
    text = clean_text(text)
    command, _, _ = text.strip().partition(" ")
    if command.lower() in ("/start", f"/start@{bot.username.lower()}"):
        text = "/help"  # what a Telegram client sends when someone opens the chat
    replied = message.reply_to_message
    return Incoming(
        platform="telegram",
        chat_id=str(message.chat.id),
        chat_kind="private" if message.chat.type == "private" else "group",
        sender=sender_of(message.from_user),
        text=text.strip(),
        addressed=message.chat.type == "private" or is_for_bot(message, bot),
        message_id=str(message.message_id),
        reply_to=str(replied.message_id) if replied is not None else None,
        voice=voice,
        attachment=attachment,
        ts=message.date,
    )


def _voice_note(message: Message) -> VoiceNote | None:
    """A voice note or audio file, downloaded through getFile only when halo asks for it."""
    sound = message.voice or message.audio
    if sound is None:
        return None

    async def read() -> bytes:
        file = await sound.get_file()
        return bytes(await file.download_as_bytearray())

    seconds = sound.duration
    duration = int(seconds.total_seconds()) if isinstance(seconds, timedelta) else int(seconds)
    return VoiceNote(read, mime=sound.mime_type or "audio/ogg", size=sound.file_size, duration=duration)


def _attachment(message: Message) -> Attachment | None:
    """A photo (its largest size) or a document, downloaded through getFile only when halo asks."""
    if message.photo:
        photo = max(message.photo, key=lambda size: size.width * size.height)
        return Attachment(_download(photo), "image", "image/jpeg", size=photo.file_size)  # Telegram sends JPEG
    document = message.document
    if document is None:
        return None
    mime = document.mime_type or "application/octet-stream"
    return Attachment(_download(document), attachment_kind(mime), mime, document.file_name, document.file_size)


def _download(media: PhotoSize | Document) -> Callable[[], Awaitable[bytes]]:
    async def read() -> bytes:
        file = await media.get_file()
        return bytes(await file.download_as_bytearray())

    return read
