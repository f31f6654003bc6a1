"""halo: a family-first chat-bot gateway. `VERSION` is the installed package's, read once."""

from importlib.metadata import version

VERSION = version("halo")
