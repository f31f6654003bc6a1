"""One scope's index, `memory/scopes/<hash>/semantic.db`: files, chunks, FTS5 and vec0.

Tables:
- `meta`: the index's identity (scope id, chunking version, embedder/model/dim) and the
  transcript watermark. A chunking change drops the chunks; an embedder change drops the
  vectors; vectors of two models are never mixed.
- `files`: each markdown file indexed, with its content hash, mtime and size.
- `chunks`: source, line range, text, hash, time (for decay), and the embedding it uses.
- `chunks_fts`: FTS5 over the chunk text and its date words (external content, kept in
  step by triggers), BM25-ranked.
- `embeddings` + `vectors` (vec0, float32): the embedding cache, keyed by (model, chunk
  hash); a chunk whose text was embedded before points at the same row, so an unchanged
  chunk is never embedded twice and each vector is stored once.

Connections are used from worker threads, one operation at a time (a lock per index).
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memory.semantic.chunking import CHUNKING_VERSION, Chunk
from memory.semantic.embedders import EmbedderIdentity
from memory.semantic.sqlite import connect

if TYPE_CHECKING:  # imported where vectors are read or compared: with no embedder, never
    import numpy as np

log = logging.getLogger(__name__)

SCHEMA_VERSION = "1"
INDEX_FILE = "semantic.db"

_SCHEMA = """
create table if not exists meta (key text primary key, value text not null);
create table if not exists files (
  path text primary key, hash text not null, mtime real not null, size integer not null
);
create table if not exists embeddings (
  id integer primary key, model text not null, hash text not null, unique (model, hash)
);
create table if not exists chunks (
  id integer primary key,
  source text not null,
  start_line integer not null,
  end_line integer not null,
  text text not null,
  keywords text not null default '',
  hash text not null,
  ts real,
  embedding_id integer references embeddings(id) on delete set null
);
create index if not exists chunks_source on chunks(source, start_line);
create index if not exists chunks_hash on chunks(hash);
create index if not exists chunks_embedding on chunks(embedding_id);
create virtual table if not exists chunks_fts using fts5(
  text, keywords, content='chunks', content_rowid='id', tokenize='porter unicode61 remove_diacritics 2'
);
create trigger if not exists chunks_ai after insert on chunks begin
  insert into chunks_fts(rowid, text, keywords) values (new.id, new.text, new.keywords);
end;
create trigger if not exists chunks_ad after delete on chunks begin
  insert into chunks_fts(chunks_fts, rowid, text, keywords) values ('delete', old.id, old.text, old.keywords);
end;
"""


@dataclass(frozen=True, slots=True)
class ChunkRow:
    id: int
    source: str
    start_line: int
    end_line: int
    text: str
    ts: float | None
    embedding_id: int | None


@dataclass(frozen=True, slots=True)
class FileState:
    hash: str
    mtime: float
    size: int


class ScopeIndex:
    """The index of one scope. Every method blocks: call it from a worker thread."""

    def __init__(self, path: Path, scope_id: str) -> None:
        self.path = path
        self.scope_id = scope_id
        path.parent.mkdir(parents=True, exist_ok=True)
        self._conn, self.support = connect(path)
        self._lock = threading.RLock()
        self._mirror: _VectorMirror | None = None
        self._df: dict[str, int] = {}
        self._df_total = 0
        with self._lock:
            self._conn.executescript(_SCHEMA)
            stored = self.meta("scope_id")
            if stored is None:
                self.set_meta("scope_id", scope_id)
                self.set_meta("schema_version", SCHEMA_VERSION)
            elif stored != scope_id:
                raise ValueError(f"{path} belongs to scope {stored!r}, not {scope_id!r}")

    @staticmethod
    def stored_scope_id(path: Path) -> str | None:
        """Which scope an index file belongs to, without opening it for writing."""
        conn, _ = connect(path)
        try:
            row = conn.execute("select value from meta where key = 'scope_id'").fetchone()
            return str(row[0]) if row else None
        except Exception:
            return None
        finally:
            conn.close()

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def checkpoint(self) -> None:
        """Fold the write-ahead log into the database file (before measuring or copying it)."""
        with self._lock:
            self._conn.execute("pragma wal_checkpoint(truncate)")

    @contextlib.contextmanager
    def transaction(self) -> Iterator[Any]:
        with self._lock:
            self._conn.execute("begin immediate")
            try:
                yield self._conn
            except BaseException:
                self._conn.execute("rollback")
                raise
            self._conn.execute("commit")

    # --- meta and identity -------------------------------------------------------

    def meta(self, key: str) -> str | None:
        with self._lock:
            row = self._conn.execute("select value from meta where key = ?", (key,)).fetchone()
        return str(row[0]) if row else None

    def set_meta(self, key: str, value: str | int | float) -> None:
        with self._lock:
            self._conn.execute("insert or replace into meta(key, value) values (?, ?)", (key, str(value)))

    def ensure_chunking(self, version: str = CHUNKING_VERSION) -> bool:
        """Drop every chunk if they were cut differently; True when the index must be rebuilt."""
        current = self.meta("chunking")
        if current == version:
            return False
        with self.transaction() as db:
            db.execute("delete from chunks")
            db.execute("delete from files")
            db.execute("insert or replace into meta(key, value) values ('chunking', ?)", (version,))
            db.execute("delete from meta where key in ('transcript_offset', 'transcript_lines')")
        if current is not None:
            log.info("semantic index %s: chunking changed (%s → %s), rebuilding", self.scope_id, current, version)
        return current is not None

    def vector_identity(self) -> EmbedderIdentity | None:
        key = self.meta("embedder")
        if not key:
            return None
        name, rest = key.split("/", 1)
        model, dim = rest.rsplit("/", 1)
        return EmbedderIdentity(name, model, int(dim))

    def ensure_vectors(self, identity: EmbedderIdentity) -> bool:
        """Make the vector table fit `identity`. A different model or dimension drops every vector
        (they would be meaningless next to the new ones); True when that happened."""
        if not self.support.vectors:
            return False
        current = self.meta("embedder")
        if current == identity.key and self._has_vec_table():
            return False
        with self.transaction() as db:
            db.execute("update chunks set embedding_id = null")
            db.execute("delete from embeddings")
            db.execute("drop table if exists vectors")
            db.execute(
                f"create virtual table vectors using vec0(embedding float[{int(identity.dim)}] distance_metric=cosine)"
            )
            db.execute("insert or replace into meta(key, value) values ('embedder', ?)", (identity.key,))
        self._mirror = None
        if current is not None:
            log.warning(
                "semantic index %s: embedder changed (%s → %s): every chunk is embedded again",
                self.scope_id,
                current,
                identity.key,
            )
        return current is not None

    def _has_vec_table(self) -> bool:
        """The vec0 table exists and this connection can read it (sqlite-vec loaded)."""
        if not self.support.vectors:
            return False
        with self._lock:
            row = self._conn.execute("select 1 from sqlite_master where name = 'vectors'").fetchone()
        return row is not None

    # --- files and chunks --------------------------------------------------------

    def files(self) -> dict[str, FileState]:
        with self._lock:
            rows = self._conn.execute("select path, hash, mtime, size from files").fetchall()
        return {path: FileState(h, mtime, size) for path, h, mtime, size in rows}

    def touch_file(self, path: str, state: FileState) -> None:
        with self._lock:
            self._conn.execute(
                "insert or replace into files(path, hash, mtime, size) values (?, ?, ?, ?)",
                (path, state.hash, state.mtime, state.size),
            )

    def replace_source(self, source: str, chunks: Sequence[Chunk], state: FileState | None) -> None:
        """The new chunks of one markdown file replace its old ones, in one transaction."""
        with self.transaction() as db:
            db.execute("delete from chunks where source = ?", (source,))
            self._insert(db, chunks)
            if state is None:
                db.execute("delete from files where path = ?", (source,))
            else:
                db.execute(
                    "insert or replace into files(path, hash, mtime, size) values (?, ?, ?, ?)",
                    (source, state.hash, state.mtime, state.size),
                )

    def add_chunks(self, chunks: Sequence[Chunk], meta: dict[str, str | int] | None = None) -> None:
        """Append chunks (transcript sync) and move the watermark in the same transaction."""
        with self.transaction() as db:
            self._insert(db, chunks)
            for key, value in (meta or {}).items():
                db.execute("insert or replace into meta(key, value) values (?, ?)", (key, str(value)))

    def drop_source(self, source: str) -> None:
        with self.transaction() as db:
            db.execute("delete from chunks where source = ?", (source,))
            db.execute("delete from files where path = ?", (source,))

    def _insert(self, db: Any, chunks: Iterable[Chunk]) -> None:
        model = self.meta("embedder") or ""
        db.executemany(
            "insert into chunks(source, start_line, end_line, text, keywords, hash, ts, embedding_id) "
            "values (?, ?, ?, ?, ?, ?, ?, (select id from embeddings where model = ? and hash = ?))",
            [(c.source, c.start_line, c.end_line, c.text, c.keywords, c.hash, c.ts, model, c.hash) for c in chunks],
        )

    # --- embeddings --------------------------------------------------------------

    def pending(self, limit: int = 100_000) -> list[tuple[str, str]]:
        """(hash, text) of chunks that have no vector yet, one per distinct text."""
        with self._lock:
            rows = self._conn.execute(
                "select hash, min(text) from chunks where embedding_id is null group by hash limit ?", (limit,)
            ).fetchall()
        return [(h, t) for h, t in rows]

    def pending_count(self) -> int:
        with self._lock:
            return int(self._conn.execute("select count(*) from chunks where embedding_id is null").fetchone()[0])

    def store_vectors(self, identity: EmbedderIdentity, hashes: Sequence[str], vectors: np.ndarray) -> None:
        """Cache the vectors under (model, hash) and point every chunk with that hash at them."""
        import numpy as np

        if self.meta("embedder") != identity.key:
            raise RuntimeError(f"index {self.scope_id} holds {self.meta('embedder')} vectors, not {identity.key}")
        with self.transaction() as db:
            for text_hash, vector in zip(hashes, vectors, strict=True):
                cur = db.execute(
                    "insert or ignore into embeddings(model, hash) values (?, ?)", (identity.key, text_hash)
                )
                if cur.rowcount:
                    row_id = cur.lastrowid
                    db.execute(
                        "insert into vectors(rowid, embedding) values (?, ?)",
                        (row_id, np.asarray(vector, dtype=np.float32).tobytes()),
                    )
                else:
                    row_id = db.execute(
                        "select id from embeddings where model = ? and hash = ?", (identity.key, text_hash)
                    ).fetchone()[0]
                db.execute(
                    "update chunks set embedding_id = ? where hash = ? and embedding_id is null", (row_id, text_hash)
                )
            self._bump_vectors(db)

    def collect_garbage(self) -> int:
        """Forget cached vectors no chunk uses any more; returns how many. Without sqlite-vec the
        vec0 table cannot be touched, so the cache is kept as it is for when it loads again."""
        if not self._has_vec_table():
            return 0
        with self.transaction() as db:
            unused = [
                r[0]
                for r in db.execute(
                    "select id from embeddings e where not exists (select 1 from chunks c where c.embedding_id = e.id)"
                )
            ]
            if unused:
                db.executemany("delete from vectors where rowid = ?", [(i,) for i in unused])
            db.executemany("delete from embeddings where id = ?", [(i,) for i in unused])
            if unused:
                self._bump_vectors(db)
        return len(unused)

    def _bump_vectors(self, db: Any) -> None:
        db.execute(
            "insert into meta(key, value) values ('vectors_version', '1') "
            "on conflict(key) do update set value = cast(value as integer) + 1"
        )

    # --- search primitives -------------------------------------------------------

    def text_candidates(self, fts_query: str, limit: int) -> list[tuple[int, float]]:
        """(chunk id, BM25 score, higher is better) for chunks matching the FTS5 query."""
        if not fts_query:
            return []
        with self._lock:
            rows = self._conn.execute(
                "select rowid, -bm25(chunks_fts, 1.0, 0.5) from chunks_fts where chunks_fts match ? "
                "order by bm25(chunks_fts, 1.0, 0.5) limit ?",
                (fts_query, limit),
            ).fetchall()
        return [(int(i), float(s)) for i, s in rows]

    def common_terms(self, terms: Sequence[str], share: float) -> set[str]:
        """Which of these words are in more than `share` of the chunks (a speaker's name in a
        group's transcript). BM25 gives such a word no weight, but matching it still makes
        FTS5 score half the index. Counts are cached until the index grows by a tenth."""
        with self._lock:
            total = int(self._conn.execute("select max(id) from chunks").fetchone()[0] or 0)
            if total > self._df_total * 1.1 or total < self._df_total:
                self._df, self._df_total = {}, total
            for term in terms:
                if term not in self._df:
                    self._df[term] = int(
                        self._conn.execute(
                            "select count(*) from chunks_fts where chunks_fts match ?", (f'text : "{term}"',)
                        ).fetchone()[0]
                    )
        return {t for t in terms if total and self._df[t] > share * total}

    def date_matches(self, terms: Iterable[str], chunk_ids: Iterable[int]) -> set[int]:
        """Which of these chunks carry one of these words among their date words (the question
        named their day). Read by id, not by a full-text match on the date column: a year or
        a month is in the date words of thousands of chunks, and matching them all cost
        10–100 ms a question."""
        wanted = {t.casefold() for t in terms}
        ids = sorted({int(i) for i in chunk_ids})
        if not wanted or not ids:
            return set()
        marks = ",".join("?" * len(ids))
        with self._lock:
            rows = self._conn.execute(f"select id, keywords from chunks where id in ({marks})", ids).fetchall()
        return {int(i) for i, words in rows if wanted & set(str(words).casefold().split())}

    def vector_candidates(self, query: np.ndarray, limit: int, max_mirrored: int) -> list[tuple[int, float]]:
        """(embedding id, cosine) of the nearest vectors. Small and medium indexes scan an
        in-memory mirror of the vec0 table with NumPy (exact, ~10x faster than vec0's scan on
        this hardware); past `max_mirrored` rows, vec0's own KNN answers without the memory."""
        import numpy as np

        if not self._has_vec_table() or not np.any(query):
            return []
        mirror = self._vector_mirror(max_mirrored)
        if mirror is not None:
            return mirror.nearest(query, limit)
        with self._lock:
            rows = self._conn.execute(
                "select rowid, distance from vectors where embedding match ? and k = ?",
                (np.asarray(query, dtype=np.float32).tobytes(), limit),
            ).fetchall()
        return [(int(i), 1.0 - float(d)) for i, d in rows]

    def _vector_mirror(self, max_mirrored: int) -> _VectorMirror | None:
        with self._lock:
            version = self.meta("vectors_version") or "0"
            if self._mirror is not None and self._mirror.version == version:
                return self._mirror if len(self._mirror.ids) <= max_mirrored else None
            count = int(self._conn.execute("select count(*) from embeddings").fetchone()[0])
            if count > max_mirrored:
                self._mirror = None
                return None
            rows = self._conn.execute("select rowid, embedding from vectors").fetchall()
            self._mirror = _VectorMirror.build(version, rows)
            return self._mirror

    def vectors_of(self, embedding_ids: Iterable[int]) -> dict[int, np.ndarray]:
        ids = sorted({int(i) for i in embedding_ids})
        if not ids or not self._has_vec_table():
            return {}
        mirror = self._mirror
        if mirror is not None and mirror.version == (self.meta("vectors_version") or "0"):
            return mirror.get(ids)
        marks = ",".join("?" * len(ids))
        with self._lock:
            rows = self._conn.execute(f"select rowid, embedding from vectors where rowid in ({marks})", ids).fetchall()
        import numpy as np

        return {int(i): np.frombuffer(blob, dtype=np.float32) for i, blob in rows}

    def chunks_by_id(self, ids: Iterable[int]) -> dict[int, ChunkRow]:
        return self._rows("id", ids)

    def chunks_by_embedding(self, embedding_ids: Iterable[int]) -> dict[int, ChunkRow]:
        return self._rows("embedding_id", embedding_ids)

    def _rows(self, column: str, values: Iterable[int]) -> dict[int, ChunkRow]:
        wanted = sorted({int(v) for v in values})
        if not wanted:
            return {}
        marks = ",".join("?" * len(wanted))
        with self._lock:
            rows = self._conn.execute(
                "select id, source, start_line, end_line, text, ts, embedding_id from chunks "
                f"where {column} in ({marks})",
                wanted,
            ).fetchall()
        return {int(r[0]): ChunkRow(*r) for r in rows}

    def source_counts(self) -> dict[str, int]:
        """Chunks by kind of source: `transcript`, `daily`, `files`, or the file's name (MEMORY.md)."""
        with self._lock:
            rows = self._conn.execute(
                "select case when source like 'daily/%' then 'daily' when source like 'files/%' then 'files' "
                "else source end, count(*) from chunks group by 1"
            ).fetchall()
        return {str(kind): int(n) for kind, n in rows}

    def neighbours(
        self, source: str, spans: Sequence[tuple[int, int]], turns: int
    ) -> dict[tuple[int, int], tuple[list[ChunkRow], list[ChunkRow]]]:
        """For each (start line, end line) of `source`: up to `turns` chunks just before and just
        after it, in order. One query for every span (a few lines around each), and an exact
        query only for a span whose neighbours lie further off (skipped commands, events)."""
        columns = "id, source, start_line, end_line, text, ts, embedding_id"
        margin = 3 * max(1, turns)  # a turn and its reply are two lines
        found: dict[tuple[int, int], tuple[list[ChunkRow], list[ChunkRow]]] = {}
        if not spans or turns <= 0:
            return found
        ranges = " or ".join("start_line between ? and ?" for _ in spans)
        bounds = [v for start, end in spans for v in (start - margin, end + margin)]
        with self._lock:
            near = [
                ChunkRow(*r)
                for r in self._conn.execute(
                    f"select {columns} from chunks where source = ? and ({ranges}) order by start_line",
                    (source, *bounds),
                ).fetchall()
            ]
            for start, end in spans:
                before = [r for r in near if start - margin <= r.start_line < start][-turns:]
                after = [r for r in near if end < r.start_line <= end + margin][:turns]
                if len(before) < turns and start - margin > 1:
                    before = [
                        ChunkRow(*r)
                        for r in reversed(
                            self._conn.execute(
                                f"select {columns} from chunks where source = ? and start_line < ? "
                                "order by start_line desc limit ?",
                                (source, start, turns),
                            ).fetchall()
                        )
                    ]
                if len(after) < turns:
                    after = [
                        ChunkRow(*r)
                        for r in self._conn.execute(
                            f"select {columns} from chunks where source = ? and start_line > ? "
                            "order by start_line limit ?",
                            (source, end, turns),
                        ).fetchall()
                    ]
                found[start, end] = (before, after)
        return found

    def stats(self) -> dict[str, Any]:
        with self._lock:
            chunks = int(self._conn.execute("select count(*) from chunks").fetchone()[0])
            vectors = int(self._conn.execute("select count(*) from embeddings").fetchone()[0])
            files = int(self._conn.execute("select count(*) from files").fetchone()[0])
        return {
            "chunks": chunks,
            "vectors": vectors,
            "files": files,
            "pending_embeddings": self.pending_count(),
            "embedder": self.meta("embedder"),
            "chunking": self.meta("chunking"),
        }


class _VectorMirror:
    """The vec0 table's vectors as one NumPy matrix, rebuilt when `vectors_version` moves."""

    def __init__(self, version: str, ids: np.ndarray, matrix: np.ndarray) -> None:
        self.version = version
        self.ids = ids
        self.matrix = matrix
        self._pos = {int(i): n for n, i in enumerate(ids)}

    @classmethod
    def build(cls, version: str, rows: list[tuple[int, bytes]]) -> _VectorMirror:
        import numpy as np

        if not rows:
            return cls(version, np.zeros(0, dtype=np.int64), np.zeros((0, 0), dtype=np.float32))
        ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
        matrix = np.frombuffer(b"".join(r[1] for r in rows), dtype=np.float32).reshape(len(rows), -1)
        return cls(version, ids, matrix)

    def nearest(self, query: np.ndarray, limit: int) -> list[tuple[int, float]]:
        if not len(self.ids):
            return []
        import numpy as np

        scores = self.matrix @ np.asarray(query, dtype=np.float32)
        top = np.argpartition(-scores, limit)[:limit] if limit < len(scores) else np.arange(len(scores))
        top = top[np.argsort(-scores[top])]
        return [(int(self.ids[i]), float(scores[i])) for i in top]

    def get(self, ids: Sequence[int]) -> dict[int, np.ndarray]:
        return {i: self.matrix[self._pos[i]] for i in ids if i in self._pos}
