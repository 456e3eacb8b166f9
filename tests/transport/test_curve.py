"""Per-client keys (CurveZMQ): only listed clients connect, each only under its own name,
and a member cannot pass off a relayed message as another member's."""

from __future__ import annotations

import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import zmq

from groupcomm.core.messages import SentMessage
from groupcomm.transport.communicator import Communicator, JoinError
from groupcomm.transport.config import Connection
from groupcomm.transport.curve import ClientKeys, CurveKeyError, ServerKeys, create_keys
from groupcomm.transport.keys import resolve_key, write_new_key
from groupcomm.transport.server import SessionServer
from groupcomm.wire.envelopes import pack_envelopes
from groupcomm.wire.streams import StreamEncoder
from tests.helpers import wait_until

pytestmark = pytest.mark.skipif(not zmq.has("curve"), reason="libzmq built without CURVE")



@pytest.fixture
def keys_dir(tmp_path: Path) -> Path:
    directory = tmp_path / "keys"
    create_keys(directory, ["server", "alice", "bob", "carol"])
    return directory


@pytest.fixture
def server(tmp_path: Path, keys_dir: Path) -> Iterator[tuple[SessionServer, Path]]:
    key_file = tmp_path / "session.key"
    write_new_key(key_file)
    context = zmq.Context()
    key = resolve_key(str(key_file))
    assert key is not None
    served = SessionServer(key, "tcp://127.0.0.1:0", curve=ServerKeys.from_dir(keys_dir),
                           context=context)
    thread = threading.Thread(target=served.serve_forever, daemon=True)
    thread.start()
    try:
        yield served, key_file
    finally:
        served.stop()
        thread.join(10)
        context.term()


def connect(name: str, served: SessionServer, key_file: Path, keys: Path,
            join_timeout: float = 10.0) -> Communicator:
    return Communicator(name, "s", server=served.address, key_file=str(key_file),
                        connection=Connection(curve_dir=str(keys), join_timeout=join_timeout))


def test_listed_clients_talk_over_encrypted_connections(server, keys_dir: Path) -> None:
    served, key_file = server
    with connect("alice", served, key_file, keys_dir) as alice, \
            connect("bob", served, key_file, keys_dir) as bob:
        got: list[str] = []
        bob.add_message_listener(lambda m: got.append(m.user_message))
        wait_until(lambda: "bob" in alice.members, what="bob in alice's members")
        alice.to_user("bob", "hello over curve")
        wait_until(lambda: got == ["hello over curve"], what="bob's delivery")
    assert served.rejects.counts == {}


def test_a_key_claiming_another_name_is_refused(server, keys_dir: Path, tmp_path: Path) -> None:
    served, key_file = server
    forged = tmp_path / "forged"
    forged.mkdir()
    shutil.copy(keys_dir / "alice.key_secret", forged / "bob.key_secret")  # alice's key
    shutil.copy(keys_dir / "server.key", forged / "server.key")
    with pytest.raises(JoinError, match="name_not_authenticated"):
        connect("bob", served, key_file, forged, join_timeout=5)
    assert served.rejects.counts["name_not_authenticated"] == 1


def test_an_unlisted_key_cannot_connect(server, tmp_path: Path, keys_dir: Path) -> None:
    served, key_file = server
    stranger = tmp_path / "stranger"
    create_keys(stranger, ["mallory"])
    shutil.copy(keys_dir / "server.key", stranger / "server.key")
    with pytest.raises(JoinError):
        connect("mallory", served, key_file, stranger, join_timeout=2)
    # and a client without keys cannot talk to a server that requires them
    with pytest.raises(JoinError):
        Communicator(
            "carol", "s", server=served.address, key_file=str(key_file),
            connection=Connection(join_timeout=2))
    assert "mallory" not in {m for s in served.registry.sessions.values() for m in s.members}


def test_a_member_cannot_pass_off_a_message_as_another_members(server, keys_dir: Path) -> None:
    served, key_file = server
    with connect("alice", served, key_file, keys_dir) as alice, \
            connect("bob", served, key_file, keys_dir) as bob, \
            connect("carol", served, key_file, keys_dir) as carol:
        got: list[tuple[str, str]] = []
        carol.add_message_listener(lambda m: got.append((m.client_name, m.user_message)))
        wait_until(lambda: {"alice", "bob"} <= set(carol.members), what="members")
        wait_until(lambda: "carol" in alice.members, what="carol at alice")
        forged = SentMessage(application_name=alice.application, session_name="s",
                             user_message="I am bob", message_id="forged-1", sender="bob",
                             destinations=("carol",))
        # alice holds the session key, so she can sign it; the server attests her name
        batch = next(pack_envelopes([forged], 1 << 20))
        frame = alice.codec.seal(StreamEncoder(compress=False).wrap(("carol",), batch))
        alice._loop.call(lambda: alice._link.relay(frame, ["carol"]))  # noqa: SLF001
        alice.to_user("carol", "honest")
        wait_until(lambda: ("alice", "honest") in got, what="the honest message")
        wait_until(lambda: carol.counters().get("rejected_impersonation", 0) == 1
                   or carol.counters().get("rejected_impersonation", 0) == 1,
                   what="the impersonation counted")
        assert got == [("alice", "honest")]
        bob.to_user("carol", "really bob")
        wait_until(lambda: ("bob", "really bob") in got, what="bob's own message")


def test_direct_routing_with_keys_is_refused(keys_dir: Path, tmp_path: Path) -> None:
    key_file = tmp_path / "k"
    write_new_key(key_file)
    with pytest.raises(ValueError, match="relayed routing only"):
        Communicator(
            "alice", "s", server="tcp://127.0.0.1:1", key_file=str(key_file),
            routing="direct", connection=Connection(curve_dir=str(keys_dir)))
    with pytest.raises(ValueError, match="no key file"):
        Communicator(
            "dave", "s", server="tcp://127.0.0.1:1", key_file=str(key_file),
            connection=Connection(curve_dir=str(keys_dir)))


def test_key_files_and_cli(tmp_path: Path) -> None:
    directory = tmp_path / "k"
    run = [sys.executable, "-m", "groupcomm.cli"]
    made = subprocess.run([*run, "keys", str(directory), "server", "alice"],
                          capture_output=True, text=True, timeout=60)
    assert made.returncode == 0, made.stderr
    assert (directory / "alice.key").exists() and (directory / "server.key_secret").exists()
    assert (directory / "alice.key_secret").stat().st_mode & 0o077 == 0
    assert ClientKeys.from_dir(directory, "alice").server_public == \
        ServerKeys.from_dir(directory).public
    again = subprocess.run([*run, "keys", str(directory), "alice"],
                           capture_output=True, text=True, timeout=60)
    assert again.returncode == 2 and "not overwriting" in again.stderr
    bad = subprocess.run([*run, "serve", "--bind", "tcp://127.0.0.1:0",
                          "--curve-dir", str(tmp_path / "missing")],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "--curve-dir" in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1
    with pytest.raises(CurveKeyError, match="no client public keys"):
        only_server = tmp_path / "only"
        create_keys(only_server, ["server"])
        ServerKeys.from_dir(only_server)
