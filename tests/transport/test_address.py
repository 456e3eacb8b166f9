"""Addresses as people type them: ``HOST:PORT`` is accepted, bad ports are refused
clearly, a client given ``HOST:PORT`` joins a real server, and a communicator with a
listener says at once that ``receive()`` will get nothing."""

from __future__ import annotations

import pytest

from groupcomm import Communicator, CommunicatorError
from groupcomm.tools.procs import ProcessGroup
from groupcomm.transport.address import EndpointError, endpoint
from groupcomm.transport.config import Connection, Listeners


@pytest.mark.parametrize(("typed", "expected"), [
    ("127.0.0.1:5555", "tcp://127.0.0.1:5555"),
    ("tcp://127.0.0.1:5555", "tcp://127.0.0.1:5555"),
    (" localhost:0 ", "tcp://localhost:0"),
    ("tcp://*:7000", "tcp://*:7000"),
    ("[::1]:80", "tcp://[::1]:80"),
    ("ipc:///tmp/g.sock", "ipc:///tmp/g.sock"),
])
def test_endpoints_people_type(typed: str, expected: str) -> None:
    assert endpoint(typed) == expected


@pytest.mark.parametrize(("typed", "says"), [
    ("tcp://127.0.0.1:99999", "ports are 0-65535"),
    ("127.0.0.1", "is not tcp://HOST:PORT or HOST:PORT"),
    ("http://example:80", "is not tcp://HOST:PORT or HOST:PORT"),
    ("127.0.0.1:port", "is not tcp://HOST:PORT or HOST:PORT"),
])
def test_bad_endpoints_say_what_form_is_expected(typed: str, says: str) -> None:
    with pytest.raises(EndpointError, match=says):
        endpoint(typed, "server address")


def test_a_client_given_host_and_port_joins(group: ProcessGroup) -> None:
    assert group.server is not None
    host_port = group.server.address.removeprefix("tcp://")
    with Communicator("alice", "s", server=host_port, key_file=str(group.key_file)) as alice:
        assert alice.server_address == group.server.address
        assert "alice" in alice.members


def test_a_bad_server_address_is_refused_before_anything_starts() -> None:
    with pytest.raises(EndpointError, match="server address '127.0.0.1:70000' has port"):
        Communicator("alice", "s", server="127.0.0.1:70000", key=b"k" * 32)


def test_receive_in_the_callback_model_raises_at_once(group: ProcessGroup) -> None:
    assert group.server is not None
    with Communicator("alice", "s", server=group.server.address,
                      key_file=str(group.key_file)) as alice:
        assert alice.receive(timeout=0.01) is None  # pull model: nothing yet
        alice.add_message_listener(lambda message: None)
        with pytest.raises(CommunicatorError, match="message listeners are registered"):
            alice.receive(timeout=30)


def _free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_no_server_is_told_apart_and_fails_fast() -> None:
    import time

    from groupcomm.transport.communicator import JoinError

    started = time.monotonic()
    with pytest.raises(JoinError, match=r"nothing listens at 127\.0\.0\.1:\d+ \(connection "
                                        r"refused\); is the session server running"):
        Communicator(
            "alice", "s", server=f"127.0.0.1:{_free_port()}", key=b"k" * 32,
            connection=Connection(join_timeout=30))
    # told long before the join timeout (30 s): about the probe's half second
    assert time.monotonic() - started < 10


def test_a_wrong_key_is_told_apart(group: ProcessGroup) -> None:
    from groupcomm.transport.communicator import JoinError

    assert group.server is not None
    with pytest.raises(JoinError, match="the session server answers, but signs with another "
                                        "session key than this client's"):
        Communicator(
            "alice", "s", server=group.server.address, key=b"w" * 32,
            connection=Connection(join_timeout=2))


def test_a_listener_added_after_messages_arrived_gets_them_first_in_order(
        group: ProcessGroup) -> None:
    """Messages delivered between the join and add_message_listener() (pull model until
    then) reach the first listener, before the later ones: none stays in the inbox."""
    import threading
    import time

    assert group.server is not None
    common = dict(server=group.server.address, key_file=str(group.key_file),
                  causality="matrix")
    with Communicator("alice", "s", **common) as alice, Communicator("bob", "s", **common) as bob:
        deadline = time.monotonic() + 10
        while "bob" not in alice.members and time.monotonic() < deadline:
            time.sleep(0.01)
        for i in range(3):
            bob.to_user("alice", f"early {i}")
        while alice.counters().get("delivered", 0) < 3 and time.monotonic() < deadline:
            time.sleep(0.01)  # delivered to the pull model's inbox
        assert alice.counters()["delivered"] == 3
        got: list[str] = []
        done = threading.Event()

        def record(message) -> None:
            got.append(message.user_message)
            if len(got) == 5:
                done.set()

        alice.add_message_listener(record)
        for i in range(2):
            bob.to_user("alice", f"late {i}")
        assert done.wait(10), got
        assert got == ["early 0", "early 1", "early 2", "late 0", "late 1"]
        with pytest.raises(CommunicatorError):  # nothing left behind for receive()
            alice.receive(timeout=0)


def test_listeners_given_to_the_constructor_hear_everything_from_the_join_on(
        group: ProcessGroup) -> None:
    import threading

    assert group.server is not None
    joined: list[str] = []
    got: list[str] = []
    heard = threading.Event()

    class Session:
        def client_joined(self, client_name, *_rest) -> None:
            joined.append(client_name)

        def client_left(self, client_name, application_name) -> None:
            pass

    def record(message) -> None:
        got.append(message.user_message)
        heard.set()

    common = dict(server=group.server.address, key_file=str(group.key_file))
    listeners = Listeners(session=Session(), message=record)
    with Communicator("alice", "s", **common, listeners=listeners), \
            Communicator("bob", "s", **common) as bob:
        bob.to_user("alice", "hello")
        assert heard.wait(10)
    assert joined[:2] == ["alice", "bob"] and got == ["hello"]
