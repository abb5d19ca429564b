"""The SQLite backend's vector matrices on disk, so that a new process (Claude Desktop starts one
per session) ranks its first search without reading every vector out of SQLite.

One file per database and embedding model, next to the database (``memory.db-vectors-<model>``):
a JSON header, then per facet the row ids, memory seqs, conversation keys and kinds, and the
vectors as the index holds them (float32, or float16: the header says), which are memory-mapped
copy-on-write rather than read. The file is a cache:
the database stays the truth, and a file is only used after checks that it is this database's
(``VectorIndex`` compares its row count and a sample of rows with the database, then catches up
on rows written after it), and that it is whole: a CRC-32 of everything after the header. A file
that fails any check is ignored, deleted and written anew. Writes go to a temporary file that
replaces the old one, so a reader never sees half a file.
"""

from __future__ import annotations

import json
import logging
import mmap
import os
import re
import zlib
from dataclasses import dataclass
from io import BufferedReader
from pathlib import Path

import numpy as np

log = logging.getLogger(__name__)

MAGIC = b"OMCPVEC1"
_ALIGN = 64
_CRC_CHUNK = 1 << 20
_VECTOR_TYPES = ("<f4", "<f2")
# Below this many rows, reading the vectors out of SQLite is as quick as checking a file.
MIN_ROWS = 4096


@dataclass(frozen=True)
class FacetRows:
    ids: np.ndarray  # int64
    seqs: np.ndarray  # int64
    convs: np.ndarray  # int64
    kinds: np.ndarray  # int8
    # float32 or float16 (n, dim): memory-mapped when read from a file; to write, the index's
    # blocks of rows (the first n rows of them count)
    vectors: np.ndarray | list[np.ndarray]


@dataclass(frozen=True)
class VectorFile:
    model: str
    dim: int
    max_id: int  # every row of the model with id <= max_id is in it (or was skipped)
    skipped: int  # rows of another dimension under the model's name, never ranked
    facets: dict[int, FacetRows]
    scanned: tuple[int, ...] = ()  # the facets every search reads in full (mapped in by ``read``)

    @property
    def rows(self) -> int:
        return sum(len(f.ids) for f in self.facets.values()) + self.skipped


def path_for(db_path: Path, model: str) -> Path:
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", model)[:80]
    return db_path.with_name(f"{db_path.name}-vectors-{slug}")


def write(path: Path, snapshot: VectorFile) -> None:
    """Write ``snapshot`` to ``path`` atomically (a temporary file, then a rename)."""
    arrays: list[tuple[str, list[np.ndarray]]] = []
    facets = []
    for code, rows in sorted(snapshot.facets.items()):
        n = len(rows.ids)
        vectors = _rows_of(rows.vectors, n)
        facets.append({"code": code, "n": n, "dtype": vectors[0].dtype.str if vectors else "<f4"})
        arrays += [(f"{code}.ids", [rows.ids.astype("<i8")]), (f"{code}.seqs", [rows.seqs.astype("<i8")]),
                   (f"{code}.convs", [rows.convs.astype("<i8")]), (f"{code}.kinds", [rows.kinds.astype("i1")]),
                   (f"{code}.vectors", vectors)]
    layout, offset = {}, 0
    for name, parts in arrays:
        layout[name] = offset
        offset += -(-sum(part.nbytes for part in parts) // _ALIGN) * _ALIGN
    crc = 0
    for _, parts in arrays:
        for part in parts:
            crc = _crc_of(part, crc)
    header = json.dumps({
        "model": snapshot.model, "dim": snapshot.dim, "max_id": snapshot.max_id, "skipped": snapshot.skipped,
        "facets": facets, "layout": layout, "data_bytes": offset, "crc32": crc, "scanned": list(snapshot.scanned),
    }).encode()
    start = -(-(len(MAGIC) + 8 + len(header)) // _ALIGN) * _ALIGN
    temporary = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    try:
        with os.fdopen(os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb") as out:
            out.write(MAGIC + len(header).to_bytes(8, "little") + header)
            for name, parts in arrays:
                out.seek(start + layout[name])
                for part in parts:
                    out.write(np.ascontiguousarray(part).data.cast("B"))
            out.truncate(start + offset)
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)


def _rows_of(vectors: np.ndarray | list[np.ndarray], n: int) -> list[np.ndarray]:
    """The first ``n`` rows, as they lie (blocks are not joined into one copy), little-endian."""
    if not isinstance(vectors, list):
        return [np.asarray(vectors[:n], dtype=vectors.dtype.newbyteorder("<"))]
    parts, left = [], n
    for block in vectors:
        if left <= 0:
            break
        parts.append(np.asarray(block[:left], dtype=block.dtype.newbyteorder("<")))
        left -= len(parts[-1])
    return parts


def read(path: Path, model: str) -> VectorFile | None:
    """The snapshot at ``path`` if it is whole and of ``model``; None (and the file removed) if
    it is not; None if there is none. Runs the CRC over every byte: call it from a worker thread.

    The CRC reads the file through a small buffer, not through the mapping: a page of the mapping
    then counts in the process's memory only once a search touches it (every search reads the
    in-context vectors, and its candidates' own vectors), not all of it from the start. The
    facets every search reads in full (``scanned``) are mapped in here, a read per page, rather
    than one page fault at a time by the first search's product (10 ms at 10k memories).
    """
    try:
        with open(path, "rb") as source:
            if source.read(len(MAGIC)) != MAGIC:
                raise ValueError("not a vector file")
            length = int.from_bytes(source.read(8), "little")
            header = json.loads(source.read(length))
            start = -(-(len(MAGIC) + 8 + length) // _ALIGN) * _ALIGN
            if header["model"] != model or path.stat().st_size != start + header["data_bytes"]:
                raise ValueError("another model, or cut short")
            dim = int(header["dim"])
            whole = np.memmap(path, dtype=np.uint8, mode="c", offset=start, shape=(header["data_bytes"],))
            facets: dict[int, FacetRows] = {}
            crc, buffer = 0, memoryview(bytearray(_CRC_CHUNK))
            for facet in header["facets"]:
                code, n = int(facet["code"]), int(facet["n"])
                held = facet.get("dtype", "<f4")  # (files written before float16 say nothing)
                if held not in _VECTOR_TYPES:
                    raise ValueError(f"vectors of type {held!r}")
                parts = {}
                for name, dtype, shape in (("ids", "<i8", (n,)), ("seqs", "<i8", (n,)), ("convs", "<i8", (n,)),
                                           ("kinds", "i1", (n,)), ("vectors", held, (n, dim))):
                    begin = header["layout"][f"{code}.{name}"]
                    size = int(np.prod(shape)) * np.dtype(dtype).itemsize
                    parts[name] = whole[begin:begin + size].view(dtype).reshape(shape)
                    crc = _crc_of_range(source, start + begin, size, crc, buffer)
                facets[code] = FacetRows(**parts)
        if crc != header["crc32"]:
            raise ValueError("checksum mismatch")
        scanned = tuple(int(code) for code in header.get("scanned", ()))
        for code in scanned:
            if code in facets:
                _touch(facets[code].vectors)
        return VectorFile(model, dim, int(header["max_id"]), int(header["skipped"]), facets, scanned)
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        log.warning("the vector file %s is unusable (%s); it is rebuilt from the database", path, exc)
        remove(path)
        return None


def _touch(vectors: np.ndarray | list[np.ndarray]) -> None:
    """Read one value per memory page of ``vectors`` (rows of a mapped file), mapping them all in."""
    if isinstance(vectors, np.ndarray) and vectors.size:
        float(vectors.reshape(-1)[:: mmap.PAGESIZE // vectors.itemsize].sum())


def release_rows(rows: np.ndarray, first: int) -> None:
    """Rows ``first`` on of ``rows`` (an array of a facet ``read`` mapped: its vectors, ids...)
    were copied out and are not read through the mapping again: the whole pages they fill leave
    the process's memory (the file's pages stay in the OS's cache; its copy-on-write mapping is
    never written). Other arrays: no-op."""
    owner = rows.base
    while owner is not None and not isinstance(owner, np.memmap):
        owner = owner.base
    if owner is None or not isinstance(owner.base, mmap.mmap) or not 0 <= first < len(rows):
        return
    mapped_at = owner.ctypes.data - owner.offset % mmap.ALLOCATIONGRANULARITY  # where the mmap begins
    begin = rows[first:].ctypes.data - mapped_at
    end = begin + rows[first:].nbytes
    begin = -(-begin // mmap.PAGESIZE) * mmap.PAGESIZE  # only pages that hold nothing else
    end = end // mmap.PAGESIZE * mmap.PAGESIZE
    if end > begin:
        owner.base.madvise(mmap.MADV_DONTNEED, begin, end - begin)


def remove(path: Path) -> None:
    try:
        path.unlink(missing_ok=True)
    except OSError as exc:
        log.warning("could not remove the vector file %s: %s", path, exc)


def _crc_of_range(source: BufferedReader, offset: int, size: int, crc: int, buffer: memoryview) -> int:
    """The CRC-32 (continuing ``crc``) of ``size`` bytes of ``source`` from ``offset``."""
    source.seek(offset)
    while size > 0:
        got = source.readinto(buffer[: min(size, len(buffer))])
        if not got:
            raise ValueError("cut short")
        crc = zlib.crc32(buffer[:got], crc)  # zlib releases the GIL for each chunk
        size -= got
    return crc


def _crc_of(array: np.ndarray, crc: int) -> int:
    data = np.ascontiguousarray(array).data.cast("B")
    for begin in range(0, len(data), _CRC_CHUNK):  # zlib releases the GIL for each chunk
        crc = zlib.crc32(data[begin:begin + _CRC_CHUNK], crc)
    return crc
