"""The daily file's log section (`ScopeFiles.log_daily`): appended without reading the file when
only halo's own appends came since, and put back in its section when something else wrote."""

from __future__ import annotations

from datetime import date
from pathlib import Path

from config.paths import HaloPaths
from memory import daily
from memory.markdown import section_body
from memory.scope_files import ScopeFiles

SCOPE = "web:mom"
DAY = date(2026, 11, 26)


def files(tmp_path: Path) -> ScopeFiles:
    paths = HaloPaths(tmp_path)
    paths.ensure()
    return ScopeFiles(paths)


def log(scope_files: ScopeFiles, *lines: str) -> None:
    with scope_files.lock(SCOPE):
        scope_files.ensure(SCOPE)
        scope_files.log_daily(SCOPE, DAY, list(lines))


def sections(scope_files: ScopeFiles) -> tuple[str, str]:
    text = scope_files.paths.daily_file(SCOPE, DAY).read_text()
    return (section_body(text, daily.NOTES) or "").strip(), (section_body(text, daily.TRANSCRIPT) or "").strip()


def test_log_lines_stay_in_their_section_whoever_wrote_in_between(tmp_path: Path) -> None:
    scope_files = files(tmp_path)
    log(scope_files, "- [09:00] [user] Mom: hello")
    log(scope_files, "- [09:01] [halo] Hi!")  # only our own append since: appended unread
    with scope_files.lock(SCOPE):  # distillation puts a note in, and the file no longer ends in the log
        scope_files.add_daily(SCOPE, DAY, daily.NOTES, ["- [09:02] Mom likes tea"], dedupe=True)
    log(scope_files, "- [09:03] [user] Mom: thanks")
    path = scope_files.paths.daily_file(SCOPE, DAY)
    path.write_text(path.read_text() + "\n## Mine\nwritten by hand\n")  # a hand edit: another size
    log(scope_files, "- [09:04] [halo] You're welcome.")

    notes, transcript = sections(scope_files)
    assert notes == "- [09:02] Mom likes tea"
    assert transcript.split("\n") == [
        "- [09:00] [user] Mom: hello",
        "- [09:01] [halo] Hi!",
        "- [09:03] [user] Mom: thanks",
        "- [09:04] [halo] You're welcome.",
    ]
    assert "written by hand" in path.read_text()
