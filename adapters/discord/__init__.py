"""Discord: work channels where a project manager asks for status, and members' DMs."""

from adapters.discord.adapter import DiscordAdapter
from adapters.discord.seen import SeenMessages

__all__ = ["DiscordAdapter", "SeenMessages"]
