"""HALO_HOME holds a family's private conversations and the bot and admin tokens: it is 0700
and every file in it 0600 (docs/ARCHITECTURE.md, "HALO_HOME"; issue 15 finding 5).

New files are private because the process umask is 077 (set once at start, before anything
is written: SQLite's -wal and -shm files, temp files and libraries' own writes included).
Homes written by older versions, or by an editor, are fixed at start-up by one walk.
"""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Iterator
from pathlib import Path

log = logging.getLogger(__name__)

PRIVATE_UMASK = 0o077
DIR_MODE = 0o700
FILE_MODE = 0o600


def private_umask() -> None:
    """From now on this process creates files 0600 and folders 0700 (unless a mode says less)."""
    os.umask(PRIVATE_UMASK)


def _loose(home: Path) -> Iterator[tuple[Path, int, int]]:
    """(path, mode, wanted) for everything under `home` (itself included) open to others.
    Symlinks are not followed: their targets are not halo's to change."""
    if home.is_dir() and not home.is_symlink():
        yield from _check(home)
    for root, dirs, files in os.walk(home):
        for name in (*dirs, *files):
            yield from _check(Path(root) / name)


def _check(path: Path) -> Iterator[tuple[Path, int, int]]:
    try:
        st = path.lstat()
    except OSError:
        return
    if stat.S_ISLNK(st.st_mode):
        return
    wanted = DIR_MODE if stat.S_ISDIR(st.st_mode) else FILE_MODE
    mode = stat.S_IMODE(st.st_mode)
    if mode & 0o077 or (stat.S_ISDIR(st.st_mode) and mode & 0o700 != 0o700):
        yield path, mode, wanted


def loose_paths(home: Path) -> list[tuple[Path, int]]:
    """What others on this machine could read: (path, its mode)."""
    return [(path, mode) for path, mode, _ in _loose(home)]


def make_private(home: Path) -> int:
    """Create `home` 0700 if needed and take group and other access from everything in it.
    Returns how many paths were changed (cheap: one walk, a chmod only where needed)."""
    private_umask()
    home.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
    changed = 0
    for path, mode, wanted in list(_loose(home)):
        try:
            os.chmod(path, (mode & wanted) | (wanted & 0o700 if path.is_dir() else 0o600))
            changed += 1
        except OSError as exc:
            log.warning("cannot make %s private: %s", path, exc)
    if changed:
        log.info("made %d paths under %s private (0700 folders, 0600 files)", changed, home)
    return changed
