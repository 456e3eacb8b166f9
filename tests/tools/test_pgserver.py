"""groupcomm.tools.pgserver: where PostgreSQL's programs are found, a failed start that
leaves nothing behind, and the session's real server (run as ``nobody`` under root)."""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from pathlib import Path

import pytest

from groupcomm.tools import pgserver
from groupcomm.tools.pgserver import PostgresError, PostgresNotFound, TempPostgres, find_pg_bin


def _programs(folder: Path, initdb: str = "#!/bin/sh\nexit 0\n") -> Path:
    folder.mkdir(parents=True)
    for name, text in (("initdb", initdb), ("pg_ctl", "#!/bin/sh\nexit 0\n")):
        (folder / name).write_text(text)
        (folder / name).chmod(stat.S_IRWXU | stat.S_IRGRP | stat.S_IXGRP | stat.S_IROTH
                              | stat.S_IXOTH)
    return folder


def test_debian_s_newest_version_is_found_off_path(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    lib = tmp_path / "lib"
    for version in ("9.6", "13", "15"):
        _programs(lib / version / "bin")
    (lib / "16" / "bin").mkdir(parents=True)  # a version without the server programs
    monkeypatch.setattr(pgserver, "DEBIAN_PG_LIB", lib)
    monkeypatch.delenv("GROUPCOMM_PG_BIN", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert find_pg_bin() == lib / "15" / "bin"  # 15 after 9.6: versions compare as numbers


def test_groupcomm_pg_bin_is_the_only_place_looked_at_when_set(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GROUPCOMM_PG_BIN", str(tmp_path / "nowhere"))
    with pytest.raises(PostgresNotFound) as missing:
        find_pg_bin()
    assert f"GROUPCOMM_PG_BIN={tmp_path / 'nowhere'}" in str(missing.value)
    chosen = _programs(tmp_path / "mine")
    monkeypatch.setenv("GROUPCOMM_PG_BIN", str(chosen))
    assert find_pg_bin() == chosen


def test_a_failed_initdb_says_why_and_leaves_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    # under root the programs run as nobody: they live where nobody can reach them
    # (pytest's temporary directories are private to root)
    reachable = Path(tempfile.mkdtemp(prefix="groupcomm-test-pgbin-"))
    reachable.chmod(0o755)
    try:
        failing = _programs(reachable / "bad", initdb="#!/bin/sh\n"
                            "echo 'initdb: disk on fire'\nexit 1\n")
        monkeypatch.setenv("GROUPCOMM_PG_BIN", str(failing))
        server = TempPostgres()
        with pytest.raises(PostgresError) as failed, server:
            pass
        assert str(failed.value) == "initdb failed: initdb: disk on fire"
        assert not server.dir.exists()
    finally:
        shutil.rmtree(reachable)


def test_the_session_server_runs_unprivileged_in_its_own_directory(
        postgres_server: TempPostgres) -> None:
    psycopg = pytest.importorskip("psycopg")
    assert postgres_server.dir.is_dir()
    if os.geteuid() == 0:  # PostgreSQL refuses root: it runs as nobody, in a dir of its own
        assert postgres_server.data.stat().st_uid != 0
    with psycopg.connect(postgres_server.url()) as conn:
        assert conn.execute("SHOW listen_addresses").fetchone() == ("127.0.0.1",)
        assert conn.execute("SHOW unix_socket_directories").fetchone() == (
            str(postgres_server.socket_dir),)
        assert conn.execute("SHOW fsync").fetchone() == ("off",)
    # the unix socket takes the same user without a password
    with psycopg.connect(host=str(postgres_server.socket_dir), port=postgres_server.port,
                         user=postgres_server.user, dbname="postgres") as conn:
        assert conn.execute("SELECT current_user").fetchone() == (postgres_server.user,)
