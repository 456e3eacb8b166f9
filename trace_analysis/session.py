"""One quiet SparkSession per Python process, and the driver's packages shipped to
workers whose Python lacks them (docs/analysis.md, "On a cluster"). log4j is set by a
properties file: Spark's start-up banner comes before any setting made from Python."""

from __future__ import annotations

import hashlib
import logging
import os
import re
import shutil
import site
import sys
import sysconfig
import tarfile
import tempfile
import threading
import zipfile
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING

from groupcomm.core import trace_schema

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

DEFAULT_MASTER = "local[2]"
#: driver memory when this module starts the JVM; override with $GROUPCOMM_SPARK_MEMORY
DEFAULT_DRIVER_MEMORY = "6g"
SHUFFLE_PARTITIONS = 4

_LOG4J = """\
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = spark %p %c{1}: %m%n
logger.repl.name = org.apache.spark.repl.Main
logger.repl.level = error
"""

_lock = threading.Lock()
_session: SparkSession | None = None


class SparkUnavailableError(RuntimeError):
    """Spark cannot start here (no Java, or the JVM failed to start)."""


def java_command() -> str | None:
    """The ``java`` Spark would run ($JAVA_HOME/bin/java, else the PATH), or None."""
    home = os.environ.get("JAVA_HOME")
    if home:
        candidate = Path(home) / "bin" / "java"
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return shutil.which("java")


def _log4j_file() -> Path:
    path = Path(tempfile.gettempdir()) / f"groupcomm-log4j2-{os.getuid()}.properties"
    if not path.exists() or path.read_text() != _LOG4J:
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(_LOG4J)
        tmp.replace(path)
    return path


def _ship_package(spark: SparkSession) -> None:
    """Make ``trace_analysis`` importable on remote executors, with a copy of the trace
    schema, the one module of ``groupcomm`` it uses there."""
    package = Path(__file__).resolve().parent
    archive = Path(tempfile.mkdtemp(prefix="groupcomm-analysis-")) / "trace_analysis.zip"
    with zipfile.ZipFile(archive, "w") as bundle:
        for path in package.rglob("*.py"):
            bundle.write(path, Path("trace_analysis") / path.relative_to(package))
        bundle.write(trace_schema.__file__, "trace_analysis/_shipped_trace_schema.py")
    spark.sparkContext.addPyFile(str(archive))


#: the packages the analysis imports on the executors
WORKER_PACKAGES = ("numpy", "msgspec", "pyarrow", "pandas")


def _probe_workers(spark: SparkSession,
                   needed: tuple[str, ...]) -> tuple[str, str, str, list[str]]:
    """An executor's Python (executable, version, platform, which of ``needed`` it
    lacks); raises :class:`SparkUnavailableError` when the workers cannot run Python."""

    def probe(_rows):  # sent by value: nothing of this project is imported there
        import importlib.util
        import sys as worker_sys
        import sysconfig as worker_sysconfig

        missing = [name for name in needed if importlib.util.find_spec(name) is None]
        yield (worker_sys.executable, ".".join(map(str, worker_sys.version_info[:3])),
               worker_sysconfig.get_platform(), missing)

    try:
        answers = spark.sparkContext.parallelize([0], 1).mapPartitions(probe).collect()
    except Exception as error:  # py4j wraps the worker's failure
        lines = [line.strip() for line in str(error).splitlines() if line.strip()]
        why = next((line for line in lines if "Error" in line or "version" in line),
                   lines[0] if lines else repr(error))
        raise SparkUnavailableError(f"the Spark workers could not run Python: {why[:300]}") \
            from None
    executable, version, platform, missing = answers[0]
    return executable, version, platform, list(missing)


def _lacking(answer: tuple[str, str, str, list[str]], why_not_shipped: str) -> str:
    executable, version, _, missing = answer
    return (f"the Spark workers' Python ({executable}, Python {version}) lacks "
            f"{', '.join(missing)}, which the job needs there{why_not_shipped}: install "
            f"them on every worker (pip install {' '.join(missing)}), or point PYSPARK_PYTHON "
            "(spark.pyspark.python) at a Python that has them on every worker")


def worker_python_path() -> str:
    """PYTHONPATH for local Python workers: this package's root, then the driver's
    site-packages (Spark starts workers with the interpreter behind a virtual
    environment's symlink, which does not see them)."""
    entries = [str(Path(__file__).resolve().parents[1])]
    entries += [p for p in site.getsitepackages() if Path(p).is_dir()]
    return os.pathsep.join(dict.fromkeys(entries))


def _ready_workers(spark: SparkSession, builder: SparkSession.Builder,
                   ship_packages: bool, packages: tuple[str, ...]) -> SparkSession:
    """``spark`` when its workers' Python has the packages, else a new session that
    ships them; raises :class:`SparkUnavailableError` saying what the workers lack."""
    try:
        _ship_package(spark)
        answer = _probe_workers(spark, packages)
        if not answer[3]:
            return spark
        _, version, platform, missing = answer
        if not ship_packages:
            raise SparkUnavailableError(_lacking(answer, " (not shipped: --no-ship)"))
        if not compatible(version, platform):
            raise SparkUnavailableError(_lacking(answer, (
                f" (not shipped: they would be this driver's builds for "
                f"{platform_tag()}, and the workers run {version} on {platform})")))
        log.warning("the Spark workers' Python lacks %s: shipping this installation's "
                    "with the job (spark.archives)", ", ".join(missing))
        archive = build_archive(packages)
        spark.stop()
        spark = (builder.config("spark.archives", f"{archive}#{ARCHIVE_ALIAS}")
                 .config("spark.executorEnv.PYTHONPATH", ARCHIVE_ALIAS)
                 .getOrCreate())
        spark.sparkContext.setLogLevel("ERROR")
        _ship_package(spark)
        answer = _probe_workers(spark, packages)
        if answer[3]:
            raise SparkUnavailableError(_lacking(answer, " (even with them shipped)"))
        return spark
    except SparkUnavailableError:
        spark.stop()
        raise


def get_spark(master: str | None = None, ship_packages: bool = True,
              packages: tuple[str, ...] = WORKER_PACKAGES) -> SparkSession:
    """The process's SparkSession, created on first use (later calls return it, with a
    warning for another master); on a cluster, workers lacking ``packages`` get them
    unless ``ship_packages`` is false. Raises :class:`SparkUnavailableError` when Java is
    missing or Spark does not start."""
    global _session
    with _lock:
        if _session is not None and _session.sparkContext._jsc is not None:
            current = _session.sparkContext.master
            if master and master != current:
                log.warning("Spark already runs with master %s; %s ignored", current, master)
            return _session
        if java_command() is None:
            raise SparkUnavailableError(
                "Java is required for the Spark analysis but was not found "
                "(install Java 17 and put it on PATH or set JAVA_HOME)"
            )
        from pyspark.sql import SparkSession

        master = master or DEFAULT_MASTER
        local = master.startswith("local")
        log4j = f"-Dlog4j2.configurationFile=file:{_log4j_file()}"
        builder = (
            SparkSession.builder.master(master)
            .appName("groupcomm-analyze")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.sql.shuffle.partitions", str(SHUFFLE_PARTITIONS))
            .config("spark.sql.adaptive.enabled", "true")
            .config("spark.driver.extraJavaOptions", log4j)
            .config("spark.executor.extraJavaOptions", log4j)
            .config("spark.sql.session.timeZone", "UTC")
        )
        if local:
            memory = os.environ.get("GROUPCOMM_SPARK_MEMORY", DEFAULT_DRIVER_MEMORY)
            builder = (
                builder.config("spark.driver.memory", memory)
                # uncompressed: more memory, 10 % less time (BENCHMARKS.md)
                .config("spark.sql.inMemoryColumnarStorage.compressed", "false")
                .config("spark.pyspark.python", sys.executable)
                .config("spark.pyspark.driver.python", sys.executable)
                .config("spark.executorEnv.PYTHONPATH", worker_python_path())
            )
        try:
            spark = builder.getOrCreate()
        except Exception as error:  # py4j/pyspark raise several types for a failed JVM
            first = str(error).strip().splitlines()[0] if str(error).strip() else repr(error)
            raise SparkUnavailableError(f"Spark did not start: {first}") from error
        spark.sparkContext.setLogLevel("ERROR")
        if not local:
            spark = _ready_workers(spark, builder, ship_packages, packages)
        log.info("Spark %s started (master %s)", spark.version, spark.sparkContext.master)
        _session = spark
        return spark


#: where the executors unpack the archive (its alias in ``spark.archives``)
ARCHIVE_ALIAS = "groupcomm-worker-deps"


def platform_tag() -> str:
    """This interpreter's ``major.minor`` and platform (what compiled packages need)."""
    return f"{sys.version_info[0]}.{sys.version_info[1]}-{sysconfig.get_platform()}"


def compatible(worker_version: str, worker_platform: str) -> bool:
    """Whether packages installed for this driver load on a worker of that Python
    version (``3.11.2``) and platform (``linux-x86_64``)."""
    return ".".join(worker_version.split(".")[:2]) + "-" + worker_platform == platform_tag()


def closure(names: tuple[str, ...] | list[str]) -> list[metadata.Distribution]:
    """The installed distributions ``names`` and everything they require here (extras
    left out, markers evaluated for this interpreter), by name."""
    from packaging.requirements import Requirement  # matplotlib requires packaging

    found: dict[str, metadata.Distribution] = {}
    pending = list(names)
    while pending:
        name = pending.pop()
        key = re.sub(r"[-_.]+", "-", name).lower()
        if key in found:
            continue
        try:
            distribution = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            raise RuntimeError(f"{name} is not installed here, so it cannot be shipped to the "
                               "Spark workers") from None
        found[key] = distribution
        for text in distribution.requires or []:
            requirement = Requirement(text)
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                pending.append(requirement.name)
    return [found[key] for key in sorted(found)]


def build_archive(names: tuple[str, ...] | list[str], directory: Path | None = None) -> Path:
    """A tar of the installed files of ``names`` and their requirements, cached by
    versions and platform."""
    distributions = closure(names)
    identity = ";".join(f"{d.metadata['Name']}={d.version}" for d in distributions)
    key = hashlib.sha256(f"{platform_tag()};{identity}".encode()).hexdigest()[:16]
    directory = directory or Path(
        os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "groupcomm"
    archive = directory / f"spark-worker-deps-{key}.tar"
    if archive.exists():
        return archive
    directory.mkdir(parents=True, exist_ok=True)
    log.info("packing %s for the Spark workers into %s", identity, archive)
    handle, partial = tempfile.mkstemp(dir=directory, suffix=".partial")
    os.close(handle)
    try:
        with tarfile.open(partial, "w") as tar:
            seen: set[str] = set()
            for distribution in distributions:
                root = Path(distribution.locate_file(""))
                for file in distribution.files or []:
                    relative = file.as_posix()
                    # files installed outside site-packages (scripts in bin/) stay behind
                    if relative.startswith("..") or relative in seen:
                        continue
                    if file.suffix == ".pyc" or "__pycache__" in file.parts:
                        continue
                    path = root / file
                    if path.is_file():
                        seen.add(relative)
                        tar.add(path, arcname=relative, recursive=False)
        os.replace(partial, archive)
    finally:
        if os.path.exists(partial):
            os.unlink(partial)
    return archive
