"""Moving a family between the embedded HALO_HOME and PostgreSQL (`halo storage migrate`),
verified by counts and checksums, all or nothing."""

from halo.storage.move.copy import Moved, Progress, Unverified
from halo.storage.move.directions import from_postgres, shown, stage_from_postgres, to_postgres
from halo.storage.move.part import MoveError

__all__ = [
    "MoveError",
    "Moved",
    "Progress",
    "Unverified",
    "from_postgres",
    "shown",
    "stage_from_postgres",
    "to_postgres",
]
