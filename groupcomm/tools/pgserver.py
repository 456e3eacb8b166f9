"""A throw-away PostgreSQL server in a temporary directory (``initdb`` and ``pg_ctl``),
for the PostgreSQL store's tests and the store benchmark.

:func:`find_pg_bin` finds the server's programs: ``$GROUPCOMM_PG_BIN`` when set (and only
there), else ``pg_ctl`` on ``PATH``, else Debian's ``/usr/lib/postgresql/<version>/bin``
(the newest version), where the ``postgresql`` package puts them without adding them to
``PATH``. ``./run test`` installs that package when they are missing (as root).

PostgreSQL refuses to run as root: when this process is root, :class:`TempPostgres` runs
``initdb`` and ``pg_ctl`` as an unprivileged user (``nobody`` unless told) through
``runuser``, in a directory it creates under the system's temporary directory and gives
to that user (pytest's own temporary directories are private to root, so the server could
not enter them). The server listens on 127.0.0.1 on a free port and on a unix socket in
that directory; clients log in with a password (scram-sha-256) over TCP and without one
over the socket. Stopping it always removes the directory.
"""

from __future__ import annotations

import contextlib
import logging
import os
import pwd
import re
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType
from urllib.parse import quote

__all__ = ["PostgresError", "PostgresNotFound", "TempPostgres", "find_pg_bin"]

log = logging.getLogger(__name__)

#: Debian's layout: one directory per major version
DEBIAN_PG_LIB = Path("/usr/lib/postgresql")


class PostgresError(RuntimeError):
    """The temporary server could not be set up, started or stopped."""


class PostgresNotFound(PostgresError):
    """No ``initdb``/``pg_ctl`` on this machine; the message says where it looked."""


def _version_key(path: Path) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", path.name)) or (0,)


def find_pg_bin() -> Path:
    """The directory holding ``initdb`` and ``pg_ctl`` (see the module's docstring);
    :class:`PostgresNotFound` when there is none."""
    chosen = os.environ.get("GROUPCOMM_PG_BIN")
    if chosen:
        candidates = [Path(chosen)]
        where = f"GROUPCOMM_PG_BIN={chosen}"
    else:
        on_path = shutil.which("pg_ctl")
        candidates = [Path(on_path).resolve().parent] if on_path else []
        if DEBIAN_PG_LIB.is_dir():
            candidates += [version / "bin" for version in sorted(
                DEBIAN_PG_LIB.iterdir(), key=_version_key, reverse=True)]
        where = f"PATH and {DEBIAN_PG_LIB}/<version>/bin"
    for candidate in candidates:
        if (candidate / "initdb").is_file() and (candidate / "pg_ctl").is_file():
            return candidate
    raise PostgresNotFound(f"no PostgreSQL server programs (initdb, pg_ctl) in {where}; "
                           "install Debian's postgresql package (./run test does as root)")


def _free_port() -> int:
    # PostgreSQL takes no port 0: ask the kernel for a free one and hand it over; the
    # race with another process taking it meanwhile is caught by retrying the start
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class TempPostgres:
    """A PostgreSQL server of its own: :meth:`start` (initdb, then pg_ctl start on a
    free port, waiting for readiness), :meth:`create_database`, :meth:`url`,
    :meth:`stop` / :meth:`start_again` (the same data, for outage tests) and
    :meth:`close` (stop and remove everything; also on failure, as a context manager).

    ``settings`` are added to ``postgresql.conf`` (e.g. ``{"fsync": "off"}`` for tests
    that never crash the server itself). ``run_as``: the user the server runs as when this
    process is root (default ``nobody``)."""

    def __init__(self, *, user: str = "groupcomm", password: str | None = None,
                 settings: dict[str, str] | None = None, run_as: str = "nobody",
                 start_timeout: float = 60.0) -> None:
        self.bin = find_pg_bin()
        self.user = user
        self.password = password or secrets.token_hex(12)
        self.settings = dict(settings or {})
        self.start_timeout = start_timeout
        self.port = 0
        self._owner: pwd.struct_passwd | None = None
        if os.geteuid() == 0:
            try:
                self._owner = pwd.getpwnam(run_as)
            except KeyError:
                raise PostgresError(f"running as root and there is no user {run_as!r} to "
                                    "run PostgreSQL as (it refuses root)") from None
        self.dir = Path(tempfile.mkdtemp(prefix="groupcomm-pg-"))
        self.data = self.dir / "data"
        self.socket_dir = self.dir / "socket"
        self.log_path = self.dir / "server.log"
        self._initialised = False
        self._running = False

    # -- processes -----------------------------------------------------------------------
    def _run(self, argv: list[str], timeout: float) -> subprocess.CompletedProcess[str]:
        """A server program, as the owner when this is root. Output goes to files, not
        pipes: ``pg_ctl start`` leaves the server holding what it inherited."""
        if self._owner is not None:
            argv = ["runuser", "-u", self._owner.pw_name, "--", *argv]
        with tempfile.TemporaryFile("w+") as out:
            try:
                done = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=out,
                                      stderr=subprocess.STDOUT, text=True, timeout=timeout,
                                      cwd=self.dir)
            except subprocess.TimeoutExpired:
                raise PostgresError(f"{Path(argv[-1]).name}: no answer in {timeout:.0f} s") \
                    from None
            out.seek(0)
            return subprocess.CompletedProcess(argv, done.returncode, out.read(), "")

    def _chown(self, path: Path) -> None:
        if self._owner is not None:
            os.chown(path, self._owner.pw_uid, self._owner.pw_gid)

    def _init(self) -> None:
        self._chown(self.dir)
        self.socket_dir.mkdir()
        self._chown(self.socket_dir)
        pwfile = self.dir / "pwfile"
        pwfile.write_text(self.password + "\n")
        pwfile.chmod(0o600)
        self._chown(pwfile)
        done = self._run([str(self.bin / "initdb"), "-D", str(self.data), "-U", self.user,
                          "--pwfile", str(pwfile), "--auth-local=trust",
                          "--auth-host=scram-sha-256", "-E", "UTF8", "--no-instructions"],
                         timeout=self.start_timeout)
        pwfile.unlink()
        if done.returncode != 0:
            raise PostgresError(f"initdb failed: {_tail(done.stdout)}")
        self._initialised = True

    def _configure(self) -> None:
        conf = {"listen_addresses": "'127.0.0.1'", "port": str(self.port),
                "unix_socket_directories": f"'{self.socket_dir}'",
                **{key: str(value) for key, value in self.settings.items()}}
        # the last setting of a key wins: appending overrides what an earlier start wrote
        with open(self.data / "postgresql.conf", "a") as out:
            out.write("".join(f"{key} = {value}\n" for key, value in conf.items()))

    def start(self) -> TempPostgres:
        """Initialise (first time) and start the server; returns when it takes
        connections. Retries on another free port if the chosen one was taken meanwhile."""
        if not self._initialised:
            self._init()
        for attempt in range(5):
            if not self.port or attempt:
                self.port = _free_port()
            self._configure()
            if self._pg_ctl_start():
                return self
            if "could not bind" not in self.log_tail() and "in use" not in self.log_tail():
                break
        raise PostgresError(f"PostgreSQL did not start: {self.log_tail()}")

    def _pg_ctl_start(self) -> bool:
        done = self._run([str(self.bin / "pg_ctl"), "start", "-w", "-t",
                          str(int(self.start_timeout)), "-D", str(self.data), "-l",
                          str(self.log_path)], timeout=self.start_timeout + 10)
        self._running = done.returncode == 0
        if not self._running:
            self._kill_postmaster()
        return self._running

    def start_again(self) -> None:
        """Start the stopped server on the same data and port (an outage ends)."""
        self._configure()
        if not self._pg_ctl_start():
            raise PostgresError(f"PostgreSQL did not start again: {self.log_tail()}")

    def stop(self, mode: str = "fast") -> None:
        """Stop the server (``fast``: clients are disconnected; ``immediate``: as after a
        crash, recovered at the next start)."""
        if not self._initialised:
            return
        done = self._run([str(self.bin / "pg_ctl"), "stop", "-w", "-m", mode, "-t", "60",
                          "-D", str(self.data)], timeout=70)
        if done.returncode != 0 and "not running" not in done.stdout \
                and "No such file" not in done.stdout:
            log.warning("pg_ctl stop: %s; killing the server", _tail(done.stdout))
            self._kill_postmaster()
        self._running = False

    def _kill_postmaster(self) -> None:
        with contextlib.suppress(OSError, ValueError, IndexError):
            pid = int((self.data / "postmaster.pid").read_text().split()[0])
            os.kill(pid, signal.SIGKILL)
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                os.kill(pid, 0)  # raises once it is gone
                time.sleep(0.05)

    def close(self) -> None:
        """Stop the server and remove its directory."""
        try:
            if self._running:
                self.stop("immediate")
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> TempPostgres:
        try:
            return self.start()
        except BaseException:
            self.close()
            raise

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.close()

    # -- clients -------------------------------------------------------------------------
    def url(self, database: str = "postgres", *, password: str | None = None) -> str:
        """A ``postgresql://`` URL of a database here (over TCP, with the password)."""
        secret = self.password if password is None else password
        return (f"postgresql://{quote(self.user)}:{quote(secret, safe='')}@127.0.0.1:"
                f"{self.port}/{quote(database)}")

    def create_database(self, name: str | None = None) -> str:
        """A new empty database; returns its URL. Needs psycopg."""
        import psycopg

        name = name or f"db_{secrets.token_hex(6)}"
        with psycopg.connect(self.url(), autocommit=True, connect_timeout=10) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def log_tail(self, lines: int = 5) -> str:
        try:
            return _tail(self.log_path.read_text(errors="replace"), lines)
        except OSError:
            return "(no server log)"


def _tail(text: str, lines: int = 5) -> str:
    return " | ".join(line.strip() for line in text.strip().splitlines()[-lines:]
                      if line.strip()) or "(no output)"
