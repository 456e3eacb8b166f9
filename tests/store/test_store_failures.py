"""A store that fails: refused at the start in one line; failing while serving (a full
disk), set aside with one line and a counter while the server goes on relaying and
tries it again, and what was committed before stays intact."""

from __future__ import annotations

import sqlite3
import sys
import threading
from pathlib import Path

import pytest

from groupcomm.cli.main import main
from groupcomm.store.backend import StoredMessage
from groupcomm.store.sqlite import SQLiteStore
from groupcomm.transport.communicator import Communicator, JoinError
from groupcomm.transport.config import Listeners
from groupcomm.transport.keys import write_new_key
from groupcomm.transport.server import SessionServer
from tests.helpers import wait_until
from tests.store.test_store_resumes import FillingDisk


@pytest.mark.parametrize("content", [b"not a database at all" * 100, None],
                         ids=["not-sqlite", "foreign-sqlite"])
def test_serve_refuses_a_bad_store_in_one_line(tmp_path: Path, capsys, content) -> None:
    path = tmp_path / "store.db"
    if content is None:
        with sqlite3.connect(path) as db:
            db.execute("CREATE TABLE orders (id INTEGER)")
    else:
        path.write_bytes(content)
    before = path.read_bytes()
    key = tmp_path / "k"
    write_new_key(key)
    assert main(["serve", "--bind", "tcp://127.0.0.1:0", "--key-file", str(key),
                 "--store", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("groupcomm serve: --store: store ")
    assert path.read_bytes() == before


def test_serve_refuses_a_postgresql_url_without_its_backend(tmp_path: Path, capsys,
                                                           monkeypatch) -> None:
    # the backend module made unimportable, as in an install without it
    monkeypatch.setitem(sys.modules, "groupcomm.store.postgresql", None)
    key = tmp_path / "k"
    write_new_key(key)
    assert main(["serve", "--bind", "tcp://127.0.0.1:0", "--key-file", str(key),
                 "--store", "postgresql://localhost/x"]) == 2
    assert "no PostgreSQL store backend" in capsys.readouterr().err


def test_a_store_that_fails_while_serving_is_set_aside_and_the_session_goes_on(
        tmp_path: Path, caplog) -> None:
    key = tmp_path / "k"
    secret = write_new_key(key)
    path = tmp_path / "store.db"
    server = SessionServer(secret, store=FillingDisk(path))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    got: dict[str, list] = {"alice": [], "bob": []}
    comms = {n: Communicator(n, "s", server=server.address, key_file=str(key),
                             listeners=Listeners(
                                 message=lambda m, n=n: got[n].append(m.user_message)))
             for n in got}
    try:
        wait_until(lambda: all(len(c.members) == 2 for c in comms.values()))
        for i in range(20):  # kept and committed
            comms["alice" if i % 2 else "bob"].to_others(i)
        wait_until(lambda: len(got["alice"]) == len(got["bob"]) == 10, what="20 messages")
        for i in range(20, 100):  # the disk fills up among these
            comms["alice" if i % 2 else "bob"].to_others(i)
        wait_until(lambda: len(got["alice"]) == len(got["bob"]) == 50,
                   what="every message, the store set aside")
        counters = server.counters()
        assert counters["store_failures"] == 1 and counters["store_down"] == 1
        # what was relayed since is counted as not stored
        assert counters["store_relays_not_stored"] > 0
        assert server.store is not None and "disk is full" in (server.store.failed or "")
        [said] = [r.getMessage() for r in caplog.records
                  if "goes on without its store" in r.getMessage()]
        assert said.endswith("tries it again in 1 s: until then nothing is stored")
        # the disk stays full: each attempt fails, and the next waits longer
        wait_until(lambda: server.counters().get("store_retries_failed", 0) >= 1,
                   what="a failed attempt")
    finally:
        for comm in comms.values():
            comm.close()
        server.stop()
        thread.join(10)
    reader = SQLiteStore(path, create=False)
    try:
        [info] = reader.sessions()
        assert 20 <= info.messages <= 30  # what was committed before the failure
        assert reader.load(info.application, info.session) is not None
        reader.append(info.application, info.session,
                      [StoredMessage("x#1", "x", 0, b"")])  # still writable
        reader.rollback()
    finally:
        reader.close()


def test_a_server_with_a_store_refuses_direct_routing_in_one_line(tmp_path: Path) -> None:
    key = tmp_path / "k"
    secret = write_new_key(key)
    server = SessionServer(secret, store=SQLiteStore(tmp_path / "store.db"))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        with pytest.raises(JoinError, match="direct routing is refused") as refused:
            Communicator("alice", "s", server=server.address, key_file=str(key),
                         routing="direct")
        assert "\n" not in str(refused.value)
        relayed = Communicator("bob", "s", server=server.address, key_file=str(key))
        relayed.close()
        wait_until(lambda: server.counters().get("store_refused_direct") == 1)
    finally:
        server.stop()
        thread.join(10)
