"""Where halo keeps its small durable state: `HaloDB` over the embedded SQLite file
($HALO_HOME/halo.db) or PostgreSQL (`storage.url`), with the PostgreSQL schema's migrations."""

from halo.storage.db import Fence, Fenced, HaloDB

__all__ = ["Fence", "Fenced", "HaloDB"]
