"""What either loader gives: the trace files of a directory (a local path, or a URI
listed and read through the Hadoop ``FileSystem`` of the driver's JVM), the columns and
events the checks keep, and :class:`Loaded`."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlparse

from trace_analysis.schema import FIELDS

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

TRACE_SUFFIXES = (".jsonl", ".jsonl.gz")
#: columns of :attr:`Loaded.events`
EVENT_COLUMNS = ("file", "blk", "rid") + FIELDS
#: the events pass 2 keeps (everything else is only counted)
HEAVY_EVENTS = ("send", "deliver", "buffer", "unbuffer")
#: the loaders :func:`load` offers (the first is the default)
LOADERS = ("workers", "native")
#: how many subfolders holding traces the error for a folder of trace folders names
SUBFOLDERS_NAMED = 10


class TraceDirError(ValueError):
    """The trace directory is missing or holds no trace files."""


@dataclass
class Loaded:
    """The parsed trace: the heavy events (cached, :data:`EVENT_COLUMNS`), the valid
    events and their metadata bytes per (protocol, process, event, kind), and what was
    wrong with the rest."""

    events: DataFrame
    counts: dict[tuple, list[int]]
    files: list[Path]
    lines: int
    blank_lines: int
    malformed: int
    malformed_samples: list[dict[str, Any]]
    cached: list[DataFrame]
    #: the send events as Arrow (:data:`~trace_analysis.send_index.RAW_COLUMNS`) when
    #: the loader collected them while parsing
    sends: Any = None
    seconds: float = 0.0

    def unpersist(self) -> None:
        for frame in self.cached:
            frame.unpersist()
        self.cached.clear()


def list_trace_files(trace_dir: str | Path) -> list[Path]:
    """The trace files of a directory, sorted; raises :class:`TraceDirError`."""
    directory = Path(trace_dir)
    if not directory.exists():
        raise TraceDirError(f"trace directory {directory} does not exist")
    if not directory.is_dir():
        raise TraceDirError(f"{directory} is not a directory")
    files = trace_files_in(directory)
    if not files:
        holders = sorted(sub.name for sub in directory.iterdir()
                         if sub.is_dir() and trace_files_in(sub))
        if holders:
            shown = ", ".join(holders[:SUBFOLDERS_NAMED])
            more = len(holders) - SUBFOLDERS_NAMED
            raise TraceDirError(
                f"no traces in {directory}; its subfolders {shown}"
                f"{f' (and {more} more)' if more > 0 else ''} hold traces: analyze one "
                "of them")
        raise TraceDirError(f"no trace files (*.jsonl) in {directory}")
    return files


def trace_files_in(directory: Path) -> list[Path]:
    return sorted(p for p in directory.iterdir() if p.name.endswith(TRACE_SUFFIXES)
                  and p.is_file())


def add_counts(counts: dict[tuple, list[int]], rows: list[Any]) -> None:
    """Add rows of (protocol, process, event, kind, n, bytes) to ``counts``."""
    for row in rows:
        entry = counts.setdefault(
            (row["protocol"], row["process"], row["event"], row["kind"]), [0, 0])
        entry[0] += row["n"]
        entry[1] += row["bytes"] or 0


def malformed_samples(blocks: dict[tuple[str, int], tuple[int, int]],
                      rows: list[Any]) -> list[dict[str, Any]]:
    """The samples of malformed ``rows`` (file, blk, rid, reason, raw): file name, line
    number (from each block's lines and first rid), reason and the first 200 characters."""
    before: dict[tuple[str, int], int] = {}  # lines in the file's earlier blocks
    totals: dict[str, int] = {}
    for file, blk in sorted(blocks):
        before[(file, blk)] = totals.get(file, 0)
        totals[file] = before[(file, blk)] + blocks[(file, blk)][0]
    return [{"file": Path(unquote(urlparse(row["file"]).path)).name,
             "line": (before[(row["file"], row["blk"])] + row["rid"] + 1
                      - blocks[(row["file"], row["blk"])][1]),
             "reason": row["reason"],
             "text": row["raw"] if len(row["raw"]) <= 200 else row["raw"][:200] + "..."}
            for row in rows]


#: a location with a scheme (one letter would be a drive, not a scheme)
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]+)://")
#: what Hadoop says when the scheme's file system is not on Spark's class path, and the
#: package that provides it
_MISSING_FILESYSTEM = re.compile(
    r"No FileSystem for scheme|ClassNotFoundException: Class \S+FileSystem not found")
_PROVIDERS = {"s3a": "org.apache.hadoop:hadoop-aws (the version of Spark's Hadoop)",
              "gs": "com.google.cloud.bigdataoss:gcs-connector",
              "abfs": "org.apache.hadoop:hadoop-azure", "abfss": "org.apache.hadoop:hadoop-azure"}


def scheme_of(location: str | Path) -> str | None:
    """The URI scheme of ``location`` (``"hdfs"``, ``"file"``...), None for a plain path."""
    match = _SCHEME.match(str(location))
    return match.group(1).lower() if match else None


def local_path(location: str | Path) -> Path:
    """The local path of a plain path or of a ``file://`` URI."""
    if scheme_of(location) == "file":
        return Path(unquote(urlparse(str(location)).path))
    return Path(location)


@dataclass(frozen=True)
class RemoteFile:
    """A trace file seen through Hadoop."""

    uri: str
    name: str
    size: int

    @property
    def stem(self) -> str:
        """The name without its trace suffix (the process, when nothing else says)."""
        return self.name.removesuffix(".gz").removesuffix(".jsonl")


def _filesystem(spark: SparkSession, uri: str) -> tuple[Any, Any]:
    jvm = spark.sparkContext._jvm  # type: ignore[attr-defined]
    path = jvm.org.apache.hadoop.fs.Path(uri)
    try:
        return path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration()), path  # type: ignore[attr-defined]
    except Exception as error:
        raise TraceDirError(_explain(uri, error)) from None


def _explain(uri: str, error: Exception) -> str:
    # a Py4J error's text carries the Java stack; the Java exception's own line says it
    java = getattr(error, "java_exception", None)
    text = str(java) if java is not None else str(error)
    if _MISSING_FILESYSTEM.search(text):
        scheme = scheme_of(uri) or "?"
        provider = _PROVIDERS.get(scheme, f"the Hadoop file system for {scheme}://")
        return (f"Spark has no file system for {scheme}:// ({uri}): add {provider} to "
                "Spark's class path (spark.jars.packages) and its credentials to the Hadoop "
                "configuration (spark.hadoop.*)")
    first = next((line.strip() for line in text.splitlines() if line.strip()), repr(error))
    return f"cannot read {uri} through Hadoop: {first}"


def list_remote_trace_files(spark: SparkSession, uri: str) -> list[RemoteFile]:
    """The trace files of the directory ``uri``, sorted by name; raises
    :class:`TraceDirError` saying what is wrong."""
    filesystem, path = _filesystem(spark, uri)
    try:
        if not filesystem.exists(path):
            raise TraceDirError(f"trace directory {uri} does not exist")
        if not filesystem.getFileStatus(path).isDirectory():
            raise TraceDirError(f"{uri} is not a directory")
        statuses = filesystem.listStatus(path)
    except TraceDirError:
        raise
    except Exception as error:
        raise TraceDirError(_explain(uri, error)) from None
    files = sorted(
        (RemoteFile(str(status.getPath().toString()), status.getPath().getName(),
                    int(status.getLen()))
         for status in statuses
         if status.isFile() and status.getPath().getName().endswith(TRACE_SUFFIXES)),
        key=lambda file: file.name,
    )
    if not files:
        raise TraceDirError(f"no trace files (*.jsonl) in {uri}")
    return files


def read_tail(spark: SparkSession, file: RemoteFile, size: int) -> bytes:
    """The last ``size`` bytes of ``file`` (all of it when shorter)."""
    filesystem, path = _filesystem(spark, file.uri)
    stream = filesystem.open(path)
    try:
        stream.seek(max(0, file.size - size))
        jvm = spark.sparkContext._jvm  # type: ignore[attr-defined]
        return bytes(jvm.org.apache.commons.io.IOUtils.toByteArray(stream))
    finally:
        stream.close()
