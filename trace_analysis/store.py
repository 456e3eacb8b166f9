"""Trace directories on Spark's own file systems (``hdfs://``, ``s3a://``, ``file://`` on
shared storage), listed and read through the Hadoop ``FileSystem`` of the driver's JVM;
a plain path is a local directory."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlparse

from trace_analysis.loaded import TraceDirError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: a location with a scheme (one letter would be a drive, not a scheme)
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]+)://")
TRACE_SUFFIXES = (".jsonl", ".jsonl.gz")
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
    """A trace file seen through Hadoop: its URI, name and size in bytes."""

    uri: str
    name: str
    size: int

    @property
    def stem(self) -> str:
        """The name without its trace suffix (the process, when nothing else says)."""
        for suffix in TRACE_SUFFIXES:
            if self.name.endswith(suffix):
                return self.name[: -len(suffix)]
        return self.name


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
    :class:`TraceDirError` saying what is wrong (no such directory, no trace files, no
    file system for the scheme)."""
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
