"""The shared JSONL appender: a crash's torn last line never swallows the next record."""

from __future__ import annotations

import json
from pathlib import Path

from transcripts import AuditLog
from transcripts.jsonl import append_line


async def test_a_torn_last_line_gets_its_own_line_and_the_next_record_survives(tmp_path: Path):
    log = tmp_path / "logs" / "events.jsonl"
    log.parent.mkdir()
    log.write_bytes(b'{"kind": "whole"}\n{"kind": "tor')  # a crash mid-write
    audit = AuditLog(log)
    audit.write("after_the_crash", scope_id="telegram:1002")
    assert [e["kind"] for e in await audit.tail(5)] == ["whole", "after_the_crash"]
    assert log.read_bytes().split(b"\n")[1] == b'{"kind": "tor'  # kept as it was, on its own line


def test_offsets_point_at_each_record_and_files_are_private(tmp_path: Path):
    path = tmp_path / "x.jsonl"
    first = append_line(path, b'{"n": 1}\n')
    second = append_line(path, b'{"n": 2}\n', durable=False)
    assert first == (0, 0) and second == (9, 9)
    with path.open("rb") as f:
        f.seek(second[1])
        assert json.loads(f.readline()) == {"n": 2}
    assert path.stat().st_mode & 0o777 == 0o600
