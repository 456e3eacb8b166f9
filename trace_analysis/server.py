"""``groupcomm analyze --serve`` and the clients that find it through its state file
(docs/analysis.md, "A warm Spark session"). One JSON object per line over TCP on
127.0.0.1: the client sends ``{"token", "op", "fingerprint", "request"}`` (``op``:
``analyze``, ``ping`` or ``stop``); the server answers ``{"hello": {...}}``, then, for an
analysis, any ``{"progress": text}`` and ``{"result": {...}}`` or ``{"error", "kind"}``."""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import json
import logging
import os
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path
from typing import TYPE_CHECKING, Any

from groupcomm.core import trace_schema
from trace_analysis.analysis import analyze
from trace_analysis.endings import process_running
from trace_analysis.loaded import TraceDirError
from trace_analysis.session import DEFAULT_MASTER, SparkUnavailableError, get_spark
from trace_analysis.synth import SynthSpec, generate

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

#: seconds a server has to answer a new connection
HELLO_TIMEOUT = 10.0
#: seconds a started server has to become ready (Spark start and warm-up)
START_TIMEOUT = 240.0
#: default seconds without a request after which a server stops
DEFAULT_IDLE_TIMEOUT = 1800.0
_LINE_LIMIT = 1 << 26

Say = Callable[[str], None]


class ServerGone(RuntimeError):
    """The server cannot be used (dead, silent, stale or gone mid-analysis)."""


#: the ``kind`` of an error answer -> what the client raises
_ERRORS: dict[str | None, type[Exception]] = {"trace_dir": TraceDirError,
                                              "spark": SparkUnavailableError}


@dataclass(frozen=True)
class ServerInfo:
    """What a state file says about a running server."""

    pid: int
    port: int
    token: str
    master: str
    spark_version: str
    state_file: str

    def describe(self) -> str:
        return f"the analysis server (pid {self.pid}, Spark {self.spark_version}, {self.master})"


def state_file(master: str | None, ship: bool, create: bool = True) -> Path:
    """The state file of the server for ``master`` (its directory made, mode 0700, if
    ``create``); the server's log and the starters' lock take its name."""
    configured = os.environ.get("GROUPCOMM_ANALYZE_SERVER_DIR")
    directory = Path(configured) if configured else (
        Path.home() / ".cache" / "groupcomm" / "analyze-server")
    if create:
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    key = hashlib.sha1(f"{master or DEFAULT_MASTER}|ship={int(ship)}".encode()).hexdigest()
    return directory / f"analyze-server-{key[:12]}.json"


@functools.cache
def code_fingerprint() -> str:
    """Changes when the analysis code, the trace schema, the Python or pyspark change
    (taken once per process: the code a process runs is the code it found at first)."""
    digest = hashlib.sha1(f"{sys.executable}|{version('pyspark')}".encode())
    package = Path(__file__).resolve().parent
    for path in [*sorted(package.glob("*.py")), Path(trace_schema.__file__)]:
        stat = path.stat()
        digest.update(f"{path.name}:{stat.st_size}:{stat.st_mtime_ns}".encode())
    return digest.hexdigest()[:16]


def _is_a_server(pid: int) -> bool:
    try:
        words = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return b"analyze" in words and b"--serve" in words and pid != os.getpid()


def _remove_if_ours(path: Path, pid: int) -> None:
    # a fresh server may have replaced the state file
    with contextlib.suppress(OSError, ValueError):
        if json.loads(path.read_text()).get("pid") == pid:
            path.unlink()


def read_state(master: str | None, ship: bool) -> ServerInfo | None:
    """The server the state file names for ``master``, or None (removing an unreadable
    file, or one whose process is gone)."""
    path = state_file(master, ship, create=False)
    try:
        data = json.loads(path.read_text())
        info = ServerInfo(pid=int(data["pid"]), port=int(data["port"]),
                          token=str(data["token"]), master=str(data["master"]),
                          spark_version=str(data.get("spark_version", "?")),
                          state_file=str(path))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError):
        log.info("unreadable state file %s removed", path)
        with contextlib.suppress(OSError):
            path.unlink()
        return None
    if not process_running(info.pid):
        log.info("the analysis server of %s (pid %d) is gone; state file removed",
                 path, info.pid)
        _remove_if_ours(path, info.pid)
        return None
    return info


@contextlib.contextmanager
def _exchange(info: ServerInfo, op: str, request: dict[str, Any] | None = None
              ) -> Iterator[tuple[dict[str, Any], Iterator[dict[str, Any]]]]:
    """Send one request; yields (hello, further messages)."""

    def gone(error: OSError) -> ServerGone:
        if isinstance(error, TimeoutError):  # only the hello has a deadline
            return ServerGone(f"no answer within {HELLO_TIMEOUT:g} s")
        return ServerGone(f"connection lost ({error})")

    try:
        sock = socket.create_connection(("127.0.0.1", info.port), timeout=HELLO_TIMEOUT)
    except OSError as error:
        raise ServerGone(f"no answer on port {info.port} ({error.strerror or error})") \
            from None
    with sock, sock.makefile("rb") as reader:
        def messages() -> Iterator[dict[str, Any]]:
            while True:
                try:
                    line = reader.readline(_LINE_LIMIT)
                except OSError as error:
                    raise gone(error) from None
                if not line:
                    raise ServerGone("it closed the connection")
                try:
                    yield json.loads(line)
                except ValueError:
                    raise ServerGone("it sent something that is not JSON") from None

        try:
            sock.sendall(json.dumps({"token": info.token, "op": op,
                                     "fingerprint": code_fingerprint(),
                                     "request": request or {}}).encode() + b"\n")
            stream = messages()
            hello = next(stream)
        except OSError as error:
            raise gone(error) from None
        if "hello" not in hello:
            raise ServerGone(str(hello.get("error", "it refused the request")))
        sock.settimeout(None)  # an analysis takes as long as it takes
        yield hello["hello"], stream


def ping(info: ServerInfo) -> dict[str, Any]:
    """The server's hello; raises :class:`ServerGone`."""
    with _exchange(info, "ping") as (hello, _):
        return hello


def stop(info: ServerInfo, wait: float = 30.0) -> bool:
    """Ask the server to stop; True when its process ends within ``wait`` seconds."""
    with contextlib.suppress(ServerGone):
        with _exchange(info, "stop") as (_, stream):
            next(stream, None)
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline and process_running(info.pid):
        time.sleep(0.1)
    gone = not process_running(info.pid)
    if gone:
        _remove_if_ours(Path(info.state_file), info.pid)
    return gone


def analyze_remote(info: ServerInfo, request: dict[str, Any], progress: Say) -> dict[str, Any]:
    """Run one analysis on the server (``request``: :func:`analyze`'s keyword arguments,
    absolute paths). Raises :class:`ServerGone` when the server is unusable, and
    :class:`TraceDirError` or :class:`SparkUnavailableError` as the analysis would."""
    with _exchange(info, "analyze", request) as (_, stream):
        for message in stream:
            if "progress" in message:
                progress(str(message["progress"]))
            elif "result" in message:
                return message["result"]
            elif "error" in message:
                text = str(message["error"])
                raised = _ERRORS.get(message.get("kind"))
                raise raised(text) if raised else ServerGone(f"it failed: {text}")
    raise ServerGone("it ended the conversation without a result")  # pragma: no cover


def usable(master: str | None, ship: bool, note: Say) -> ServerInfo | None:
    """The running server for ``master`` if it answers and runs this code; a silent or
    stale one is stopped, with one ``note``."""
    info = read_state(master, ship)
    if info is None:
        return None
    try:
        hello = ping(info)
    except ServerGone as why:
        note(f"{info.describe()} is not usable: {why}")
        if _is_a_server(info.pid):  # never a process that merely reuses the number
            with contextlib.suppress(OSError):
                os.kill(info.pid, signal.SIGTERM)
        _remove_if_ours(Path(info.state_file), info.pid)
        return None
    if hello.get("fingerprint") != code_fingerprint():
        note(f"{info.describe()} runs code that has changed since it started: stopping it")
        stop(info, wait=0)  # it removes its state file; a fresh one may start meanwhile
        return None
    return info


def find_or_start(master: str | None, ship: bool, idle_timeout: float, note: Say,
                  progress: Say) -> ServerInfo | None:
    """The usable server for ``master``, else one started in the background (``analyze
    --serve``, logging beside its state file, stopping after ``idle_timeout`` seconds
    without work); None, with one ``note``, when it does not come up in time."""
    log_path = state_file(master, ship).with_suffix(".log")
    with open(log_path.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one starter at a time; the others then find it
        info = usable(master, ship, note)
        if info is not None:
            return info
        progress("starting the analysis server (Spark), kept for later analyses")
        command = [sys.executable, "-m", "groupcomm.cli", "analyze", "--serve",
                   "--idle-timeout", f"{idle_timeout / 60:g}"]
        command += ["--master", master] if master else []
        command += [] if ship else ["--no-ship"]
        with open(log_path, "wb") as out:
            child = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=out,
                                     stderr=subprocess.STDOUT, start_new_session=True,
                                     cwd=str(log_path.parent))
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if child.poll() is not None:
                note(f"the analysis server did not start (exit code {child.returncode}; "
                     f"see {log_path})")
                return None
            info = read_state(master, ship)
            if info is not None and info.pid == child.pid:
                return info
            time.sleep(0.2)
        note(f"the analysis server did not come up within {START_TIMEOUT:.0f} s "
             f"(see {log_path})")
        child.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            child.wait(10)
        if child.poll() is None:
            child.kill()
        return None


class AnalysisServer:
    """Holds ``spark`` and answers requests (see the module docstring)."""

    def __init__(self, spark: SparkSession, master: str | None, ship: bool,
                 idle_timeout: float | None) -> None:
        self.spark = spark
        self.master = master or DEFAULT_MASTER
        self.idle_timeout = idle_timeout
        self.token = secrets.token_hex(16)
        self.fingerprint = code_fingerprint()
        self.stopping = threading.Event()
        self._analysis = threading.Lock()
        self._busy = 0
        self._busy_lock = threading.Lock()
        self._last_request = time.monotonic()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self.state_path = state_file(master, ship)

    def _hello(self) -> dict[str, Any]:
        return {"pid": os.getpid(), "master": self.master, "fingerprint": self.fingerprint,
                "spark_version": self.spark.version}

    def publish(self) -> None:
        """Write the state file, atomically, readable by this user only."""
        data = {**self._hello(), "port": self.port, "token": self.token}
        tmp = self.state_path.with_suffix(f".{os.getpid()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as handle:
            json.dump(data, handle)
        tmp.replace(self.state_path)

    def serve(self) -> None:
        """Answer requests until :attr:`stopping` is set or the idle timeout passes."""
        self._listener.settimeout(0.5)
        try:
            while not self.stopping.is_set():
                try:
                    conn, _ = self._listener.accept()
                except TimeoutError:
                    with self._busy_lock:
                        idle = self._busy == 0 and self.idle_timeout and (
                            time.monotonic() - self._last_request > self.idle_timeout)
                    if idle:
                        log.warning("no request for %.0f s: the analysis server stops",
                                    self.idle_timeout)
                        return
                    continue
                threading.Thread(target=self._handle, args=(conn,), daemon=True,
                                 name="analysis-request").start()
        finally:
            self.close()

    def close(self) -> None:
        self.stopping.set()
        with contextlib.suppress(OSError):
            self._listener.close()
        _remove_if_ours(self.state_path, os.getpid())

    def _handle(self, conn: socket.socket) -> None:
        with self._busy_lock:
            self._busy += 1
        try:
            with conn:
                conn.settimeout(HELLO_TIMEOUT)
                with conn.makefile("rb") as reader:
                    line = reader.readline(_LINE_LIMIT)
                conn.settimeout(None)
                self._answer(conn, line)
        except OSError as error:
            log.info("a client went away: %s", error)
        finally:
            with self._busy_lock:
                self._busy -= 1
                self._last_request = time.monotonic()

    def _answer(self, conn: socket.socket, line: bytes) -> None:
        def send(message: dict[str, Any]) -> None:
            conn.sendall(json.dumps(message, default=str).encode() + b"\n")

        try:
            message = json.loads(line)
        except ValueError:
            send({"error": "not a JSON request", "kind": "protocol"})
            return
        if not isinstance(message, dict) or not secrets.compare_digest(
                str(message.get("token", "")), self.token):
            send({"error": "wrong token", "kind": "protocol"})
            return
        send({"hello": self._hello()})
        op = message.get("op")
        if op == "stop":
            send({"stopped": True})
            self.stopping.set()
        elif op not in ("ping", "analyze"):
            send({"error": f"unknown op {op!r}", "kind": "protocol"})
        elif op == "analyze" and message.get("fingerprint") != self.fingerprint:
            send({"error": "the server runs other code than the client", "kind": "stale"})
        elif op == "analyze":
            self._run_analysis(message.get("request") or {}, send)

    def _run_analysis(self, request: dict[str, Any], send: Callable[[dict], None]) -> None:
        lost = threading.Event()

        def progress(text: str) -> None:
            if lost.is_set():
                return
            try:
                send({"progress": text})
            except OSError:
                lost.set()  # the client went away; the analysis still completes

        if not self._analysis.acquire(blocking=False):
            progress("waiting for the analysis server to finish another analysis")
            self._analysis.acquire()
        try:
            if self.stopping.is_set():
                send({"error": "the server is stopping", "kind": "gone"})
                return
            try:
                result = analyze(spark=self.spark, progress=progress, **request)
            except (TraceDirError, SparkUnavailableError) as error:
                kind = next(k for k, raised in _ERRORS.items() if isinstance(error, raised))
                send({"error": str(error), "kind": kind})
                return
            except Exception as error:
                log.exception("analysis of %s failed", request.get("trace_dir"))
                context = self.spark.sparkContext
                try:
                    alive = not context._jsc.sc().isStopped()  # type: ignore[union-attr]
                except Exception:  # py4j: the JVM is gone, or the context was stopped
                    alive = False
                first = (str(error).strip().splitlines() or [repr(error)])[0][:300]
                send({"error": first if alive else f"its Spark died ({first})",
                      "kind": "internal"})
                if not alive:
                    self.stopping.set()
                return
            send({"result": result})
        finally:
            self._analysis.release()


def serve(master: str | None = None, ship: bool = True,
          idle_timeout: float | None = DEFAULT_IDLE_TIMEOUT, say: Say | None = None,
          ready: Callable[[AnalysisServer], None] | None = None,
          warm_up: bool = True, stop_spark: bool = False) -> None:
    """Run the analysis server here until Ctrl-C, SIGTERM, a stop request or
    ``idle_timeout`` seconds without work (None or 0: no limit); ``ready`` is called once
    it is published. Raises :class:`SparkUnavailableError` when Spark cannot start."""
    tell = say or (lambda text: None)
    previous = usable(master, ship, log.warning)
    if previous is not None:
        raise SparkUnavailableError(
            f"{previous.describe()} already serves this master; stop it first "
            "(groupcomm analyze --stop-server)")
    tell("starting Spark")
    spark = get_spark(master, ship)
    if warm_up:  # the first analysis of a session takes several times longer
        tell("warming up (one small analysis)")
        with tempfile.TemporaryDirectory(prefix="groupcomm-warm-") as directory:
            generate(SynthSpec(events=200, processes=3, protocol="vector", violations=1,
                               undelivered=1, duplicates=1, malformed=0, pad=0), directory)
            analyze(directory, spark=spark)
    server = AnalysisServer(spark, master, ship, idle_timeout)
    previous_handler = None
    if threading.current_thread() is threading.main_thread():
        previous_handler = signal.signal(signal.SIGTERM, lambda *_: server.stopping.set())
    try:
        server.publish()
        tell(f"analysis server ready on 127.0.0.1:{server.port} (pid {os.getpid()}, "
             f"Spark {spark.version}, {server.master}); later `groupcomm analyze` calls "
             "for this master use it; Ctrl-C stops it")
        if ready is not None:
            ready(server)
        with contextlib.suppress(KeyboardInterrupt):
            server.serve()
    finally:
        server.close()
        if previous_handler is not None:
            signal.signal(signal.SIGTERM, previous_handler)
        if stop_spark:
            with contextlib.suppress(Exception):  # its JVM may be gone already
                spark.stop()
        tell("analysis server stopped")
