"""Where halo keeps its small durable state: `HaloDB` over the embedded SQLite file
($HALO_HOME/halo.db) or PostgreSQL (`storage.url`), with the PostgreSQL schema's migrations."""

from halo.storage.db import HaloDB

__all__ = ["HaloDB"]
