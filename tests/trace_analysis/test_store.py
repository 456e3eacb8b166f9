"""Trace directories named by URI, read through Spark's own (Hadoop) file systems: the
code path of hdfs:// and s3a://, exercised here with file:// (Hadoop's local file
system), and the one-line errors for what cannot be read."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.trace_analysis.test_analysis import Trace, random_trace
from trace_analysis import analyze, get_spark
from trace_analysis.load import choose_loader
from trace_analysis.loaded import (
    RemoteFile,
    TraceDirError,
    list_remote_trace_files,
    local_path,
    scheme_of,
)

# seconds to minutes a test: outside `./run test`, run by .ci/run (-m 'long and not slow')
pytestmark = pytest.mark.long


@pytest.fixture(scope="module")
def spark():
    return get_spark()


def _departures_trace(directory: Path) -> Path:
    t = Trace()
    t.send("a", "a1", ["b", "c"])
    t.deliver("b", "a1")
    t.send("c", "c1", ["b"])
    t.deliver("c", "a1")  # c's trace ends here: no departure recorded
    t.ts += 5
    t.send("a", "a2", ["b", "c"])
    t.deliver("b", "a2")
    for process in ("a", "b"):
        t.ts += 1
        t.records.append({"ts": t.ts, "process": process, "event": "leave",
                          "client": process, "protocol": "test"})
    return t.write(directory)


def _same(result: dict, local: dict) -> None:
    for key in ("events", "messages", "processes", "causal_violations", "fifo_violations",
                "undelivered", "duplicates", "undelivered_to_departed",
                "undelivered_from_departed", "abrupt_endings", "per_protocol"):
        assert result[key] == local[key], key


def test_a_file_uri_read_through_hadoop_gives_the_local_result(spark, tmp_path: Path) -> None:
    directory = _departures_trace(tmp_path / "t")
    uri = directory.resolve().as_uri()
    files = list_remote_trace_files(spark, uri)
    assert [f.name for f in files] == sorted(p.name for p in directory.glob("*.jsonl"))
    assert all(isinstance(f, RemoteFile) and f.size > 0 for f in files)
    local = analyze(directory, spark=spark)
    through_hadoop = analyze(uri, spark=spark, loader="native")
    _same(through_hadoop, local)
    # the last lines came through a Hadoop stream: c is named as ending abruptly
    assert through_hadoop["abrupt_endings"] == ["c"]
    assert through_hadoop["trace_dir"] == uri


def test_a_random_trace_by_uri_matches_by_path(spark, tmp_path: Path) -> None:
    directory = random_trace(3).write(tmp_path / "r")
    _same(analyze(directory.resolve().as_uri(), spark=spark, loader="native"),
          analyze(directory, spark=spark, loader="native"))


def test_the_loader_follows_the_location() -> None:
    assert choose_loader("/data/traces", None) == "workers"
    assert choose_loader("file:///shared/traces", None) == "workers"
    assert choose_loader("hdfs://namenode:8020/traces", None) == "native"
    assert choose_loader("s3a://bucket/traces", "native") == "native"
    with pytest.raises(TraceDirError, match="use --loader native"):
        choose_loader("hdfs://namenode:8020/traces", "workers")
    assert scheme_of("S3A://b/t") == "s3a" and scheme_of("/a/b") is None
    assert local_path("file:///a%20b/t") == Path("/a b/t")


def test_missing_directories_and_file_systems_are_one_line(spark, tmp_path: Path) -> None:
    with pytest.raises(TraceDirError, match="does not exist"):
        list_remote_trace_files(spark, (tmp_path / "nowhere").as_uri())
    (tmp_path / "empty").mkdir()
    with pytest.raises(TraceDirError, match="no trace files"):
        list_remote_trace_files(spark, (tmp_path / "empty").as_uri())
    with pytest.raises(TraceDirError) as raised:
        list_remote_trace_files(spark, "s3a://some-bucket/traces")
    message = str(raised.value)
    assert "\n" not in message and "hadoop-aws" in message and "spark.jars.packages" in message


def test_cli_refuses_the_workers_loader_for_hdfs_in_one_line() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "groupcomm.cli", "analyze", "hdfs://namenode:8020/traces",
         "--loader", "workers"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert "--loader native" in result.stderr
