"""Telegram: private DMs and the parents-only group (python-telegram-bot v22)."""

from adapters.telegram.adapter import TelegramAdapter

__all__ = ["TelegramAdapter"]
