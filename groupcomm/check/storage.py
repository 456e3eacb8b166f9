"""Compact storage for a long breadth-first search: visited fingerprints in NumPy
(:class:`FingerprintSet`), one level's packed states in memory and spilled to disk
(:class:`Frontier`), and checkpoints (:func:`save_checkpoint`, :func:`load_checkpoint`).
The design and its measurements: docs/check_results.md, "How the search is made fast".
"""

from __future__ import annotations

import json
import os
import pickle
import shutil
import struct
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

#: a checkpoint's format; a different one is refused
CHECKPOINT_VERSION = 2
#: version 1 checkpoints are taken at the start of a level only; 2 adds the middle
READABLE_VERSIONS = (1, 2)
_LENGTH = struct.Struct("<I")


def collision_probability(classes: int) -> float:
    """The probability that two of ``classes`` random 64-bit fingerprints are equal."""
    return min(1.0, classes * (classes - 1) / 2 ** 65)


def _without_hugepage_advice() -> None:
    """Stop NumPy advising transparent huge pages for the arrays it allocates from now on
    in this process: a run grows in place by ``realloc``, and on this kernel a block
    advised so is copied when it moves (docs/check_results.md)."""
    setter = getattr(getattr(np, "_core", np).multiarray, "_set_madvise_hugepage", None)
    if setter is not None:
        setter(False)


class FingerprintSet:
    """A set of unsigned 64-bit fingerprints, asked and filled a batch at a time."""

    def __init__(self) -> None:
        _without_hugepage_advice()  # before any run is allocated
        self._runs: list[np.ndarray] = []
        self._count = 0

    def __len__(self) -> int:
        return self._count

    @property
    def nbytes(self) -> int:
        return sum(run.nbytes for run in self._runs)

    def add_new(self, keys: np.ndarray) -> np.ndarray:
        """Add ``keys`` (uint64); returns the positions in ``keys`` of the ones that were
        not in the set before, first occurrences only, in the order given."""
        if not len(keys):
            return np.empty(0, dtype=np.intp)
        unique, first = np.unique(keys, return_index=True)
        fresh = np.ones(len(unique), dtype=bool)
        for run in self._runs:
            where = np.searchsorted(run, unique)
            where[where == len(run)] = len(run) - 1
            fresh &= run[where] != unique
        new = unique[fresh]
        if len(new):
            self._runs.append(new)  # np.unique sorted it
            self._count += len(new)
            self._merge()
        return np.sort(first[fresh])

    def _merge(self, everything: bool = False) -> None:
        # a run merges with the one before it while that one is not at least twice as
        # long: O(log n) runs, each fingerprint moved O(log n) times (``everything``:
        # down to one run)
        runs = self._runs
        while len(runs) > 1 and (everything or len(runs[-2]) < 2 * len(runs[-1])):
            last = runs.pop()
            runs[-1] = merge_into(runs[-1], last)

    def __contains__(self, key: int) -> bool:
        probe = np.array([key], dtype=np.uint64)
        for run in self._runs:
            where = int(np.searchsorted(run, probe)[0])
            if where < len(run) and run[where] == probe[0]:
                return True
        return False

    def save(self, path: Path) -> None:
        # one sorted run, written as it lies (no copy of a possibly huge array)
        self._merge(everything=True)
        runs = self._runs
        np.save(path, runs[0] if runs else np.empty(0, np.uint64))

    @classmethod
    def load(cls, path: Path) -> FingerprintSet:
        found = cls()
        run = np.load(path)
        if run.dtype != np.uint64:
            raise ValueError(f"{path}: not a fingerprint file")
        if len(run):
            found._runs = [run]
            found._count = len(run)
        return found


#: fingerprints sorted per step of :func:`merge_into` (32 MB of each side at most)
MERGE_CHUNK = 1 << 22


def merge_into(run: np.ndarray, other: np.ndarray, chunk: int = MERGE_CHUNK) -> np.ndarray:
    """The sorted union of two sorted ``uint64`` runs with no value in common, built in
    ``run``'s memory, grown in place and filled from the back at most ``chunk`` values of
    each run at a time: beyond the two runs it costs ``other``'s size and two chunks.
    ``run`` may not be used after the call (its buffer belongs to the result)."""
    i, j = len(run), len(other)
    if j == 0:
        return run
    if not (run.flags.owndata and run.flags.c_contiguous):
        run = run.copy()
    run.resize(i + j, refcheck=False)  # nothing holds a view of a run between calls
    k = i + j
    while j:
        # the chunk-th largest value left in either run (0 when a run has no more than
        # a chunk left): `chunk` values of one run are at or above it, at most as many
        # of the other
        threshold = max(run[i - chunk] if i > chunk else 0,
                        other[j - chunk] if j > chunk else 0)
        i0 = int(np.searchsorted(run[:i], threshold)) if threshold else 0
        j0 = int(np.searchsorted(other[:j], threshold)) if threshold else 0
        piece = np.concatenate((run[i0:i], other[j0:j]))  # a copy: safe to overwrite
        piece.sort(kind="stable")  # timsort: two sorted runs merge in one pass
        run[k - len(piece):k] = piece  # k - len(piece) == i0 + j0 >= i0: read already
        k -= len(piece)
        i, j = i0, j0
    return run

class Frontier:
    """One BFS level of packed states (bytes), in memory up to ``budget`` bytes, then
    on disk under ``spill_dir``."""

    def __init__(self, budget: int, spill_dir: Path | None = None) -> None:
        self.budget = budget
        self.spill_dir = spill_dir
        self._buffer = bytearray()
        self._file: Any = None
        self._path: Path | None = None
        self._count = 0
        self.spilled_bytes = 0

    def __len__(self) -> int:
        return self._count

    def append(self, packed: bytes) -> None:
        buffer = self._buffer
        buffer += _LENGTH.pack(len(packed))
        buffer += packed
        self._count += 1
        if len(buffer) > self.budget:
            self._spill()

    def _spill(self) -> None:
        if self._file is None:
            directory = self.spill_dir or Path(tempfile.gettempdir())
            directory.mkdir(parents=True, exist_ok=True)
            handle, name = tempfile.mkstemp(prefix="frontier-", suffix=".bin", dir=directory)
            self._path = Path(name)
            self._file = os.fdopen(handle, "wb")  # (closed in drain or close)
        self._file.write(self._buffer)
        self.spilled_bytes += len(self._buffer)
        self._buffer = bytearray()

    def drain(self) -> Iterator[bytes]:
        """Every state, in the order appended; the frontier is empty afterwards. Until
        the drain ends, :meth:`write_to` still copies every record (a checkpoint in the
        middle of a level saves the whole level and how far it got)."""
        if self._file is not None:
            self._file.close()
            self._file = None
        path = self._path
        try:
            if path is not None:
                with open(path, "rb") as source:
                    yield from _records(source)
            # read in place: nothing is appended to a frontier while it drains
            yield from _records_of(self._buffer)
        finally:
            self.close()
            self._buffer = bytearray()
            self._count = 0

    def write_to(self, path: Path) -> None:
        """A copy of the records in one file (for a checkpoint); the frontier keeps them."""
        with open(path, "wb") as out:
            if self._file is not None:
                self._file.flush()
            if self._path is not None:
                with open(self._path, "rb") as source:
                    shutil.copyfileobj(source, out)
            out.write(self._buffer)

    @classmethod
    def read_from(cls, path: Path, budget: int, spill_dir: Path | None) -> Frontier:
        frontier = cls(budget, spill_dir)
        with open(path, "rb") as source:
            for packed in _records(source):
                frontier.append(packed)
        return frontier

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
        if self._path is not None:
            self._path.unlink(missing_ok=True)
            self._path = None


def _records(source: Any, chunk: int = 1 << 22) -> Iterator[bytes]:
    pending = b""
    while True:
        block = source.read(chunk)
        if not block:
            break
        data = pending + block
        end = 0
        size = len(data)
        while end + 4 <= size:
            (length,) = _LENGTH.unpack_from(data, end)
            if end + 4 + length > size:
                break
            yield data[end + 4:end + 4 + length]
            end += 4 + length
        pending = data[end:]
    if pending:
        raise ValueError("frontier file ends in the middle of a record")


def _records_of(buffer: bytearray) -> Iterator[bytes]:
    # the buffer is detached from its frontier: read it in place, without a copy
    view = memoryview(buffer)
    end = 0
    while end < len(view):
        (length,) = _LENGTH.unpack_from(view, end)
        yield bytes(view[end + 4:end + 4 + length])
        end += 4 + length


def save_checkpoint(directory: Path, *, identity: dict[str, Any], counters: dict[str, Any],
                    visited: FingerprintSet, frontier: Frontier, tables: Any,
                    following: Frontier | None = None) -> None:
    """Write a checkpoint atomically (a new directory renamed over the old one).
    ``frontier`` is the whole level; in its middle, ``counters["done"]`` of its states
    were expanded (their successors are all in ``visited``) and ``following`` is the
    next level so far."""
    directory.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".writing-", dir=directory))
    try:
        visited.save(staging / "visited.npy")
        frontier.write_to(staging / "frontier.bin")
        if following is not None:
            following.write_to(staging / "following.bin")
        with open(staging / "tables.pickle", "wb") as out:
            pickle.dump(tables, out, protocol=pickle.HIGHEST_PROTOCOL)
        (staging / "checkpoint.json").write_text(json.dumps(
            {"version": CHECKPOINT_VERSION, "identity": identity, "counters": counters},
            indent=1))
        current = directory / "current"
        old = directory / ".old"
        if old.exists():
            shutil.rmtree(old)
        if current.exists():
            current.rename(old)
        staging.rename(current)
        if old.exists():
            shutil.rmtree(old)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)


def load_checkpoint(directory: Path, identity: dict[str, Any], budget: int,
                    spill_dir: Path | None) -> dict[str, Any] | None:
    """The checkpoint in ``directory`` (``None`` if there is none); ``ValueError`` when
    it belongs to another run (``identity`` differs) or is not a checkpoint."""
    current = directory / "current"
    if not (current / "checkpoint.json").exists():
        return None
    meta = json.loads((current / "checkpoint.json").read_text())
    if meta.get("version") not in READABLE_VERSIONS:
        raise ValueError(f"{current}: checkpoint format {meta.get('version')}, this "
                         f"version reads {', '.join(map(str, READABLE_VERSIONS))}")
    if meta.get("identity") != identity:
        differs = sorted(k for k in set(identity) | set(meta.get("identity", {}))
                         if identity.get(k) != meta.get("identity", {}).get(k))
        raise ValueError(f"{current} is the checkpoint of another run (differs in: "
                         f"{', '.join(differs)}); use another --checkpoint directory")
    with open(current / "tables.pickle", "rb") as source:
        tables = pickle.load(source)  # noqa: S301 - written by this program, locally
    following = current / "following.bin"
    counters = {"done": 0, **meta["counters"]}  # version 1: always the start of a level
    return {"counters": counters, "tables": tables,
            "visited": FingerprintSet.load(current / "visited.npy"),
            "frontier": Frontier.read_from(current / "frontier.bin", budget, spill_dir),
            "following": (Frontier.read_from(following, budget, spill_dir)
                          if following.exists() else Frontier(budget, spill_dir))}
