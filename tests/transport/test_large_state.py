"""A state larger than a frame travels in parts, member to newcomer and store to
newcomer, and is put back together exactly; past a newcomer's max_state it is refused
in one line (real communicators and a real server over ZeroMQ). In the default suite
with 1 MiB frames and a 2.5 MiB state; with the default 16 MiB frames and a 20 MiB
state under ``long``."""

from __future__ import annotations

import hashlib
import math
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from groupcomm.protocol import session_events as events
from groupcomm.protocol.store_rules import StorePolicy
from groupcomm.store.sqlite import SQLiteStore
from groupcomm.transport.communicator import Communicator
from groupcomm.transport.config import Connection, Listeners, StateTransfer
from groupcomm.transport.keys import write_new_key
from groupcomm.transport.server import SessionServer
from groupcomm.wire.frames import DEFAULT_MAX_FRAME
from groupcomm.wire.parts import PART_HEADROOM
from tests.helpers import wait_until

MIB = 1024 * 1024
#: (max_frame, state size): a state of 2.5 frames, or 1.25, in parts of half a frame
SIZES = [pytest.param((MIB, 5 * MIB // 2), id="1MiB-frames"),
         pytest.param((DEFAULT_MAX_FRAME, 20 * MIB), id="16MiB-frames",
                      marks=pytest.mark.long)]


class App:
    """An application whose whole state is one large blob."""

    def __init__(self, state: bytes | None = None) -> None:
        self.state = state
        self.events: list[events.SessionEvent] = []

    def provide(self) -> Any:
        return self.state

    def consume(self, state: Any) -> None:
        self.state = state

    def settled(self) -> bool:
        return any(isinstance(e, (events.StateInstalled, events.StateUnavailable))
                   for e in self.events)


def _member(server: SessionServer, key: Path, name: str, app: App,
            max_state: int | None = None) -> Communicator:
    limits = {} if max_state is None else {"max_state": max_state}
    return Communicator(name, "big", server=server.address, key_file=str(key),
                        connection=Connection(max_frame=server.codec.max_frame),
                        state=StateTransfer(provider=app.provide, consumer=app.consume,
                                            timeout=30.0, **limits),
                        listeners=Listeners(event=app.events.append))


@pytest.fixture
def key(tmp_path: Path) -> Iterator[tuple[Path, bytes]]:
    path = tmp_path / "k"
    yield path, write_new_key(path)


def _serve(server: SessionServer) -> threading.Thread:
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    return thread


@pytest.mark.parametrize("sizes", SIZES)
def test_a_member_state_larger_than_a_frame_reaches_a_newcomer_in_parts(
        key, caplog, sizes) -> None:
    path, secret = key
    max_frame, size = sizes
    server = SessionServer(secret, max_frame=max_frame, heartbeat_timeout=2.0)
    thread = _serve(server)
    blob = os.urandom(size)
    alice, bob, carol = App(blob), App(), App()
    comms = [_member(server, path, "alice", alice)]
    try:
        comms.append(_member(server, path, "bob", bob))
        wait_until(bob.settled, timeout=60, what="bob's state")
        assert [type(e) for e in bob.events if isinstance(
            e, (events.StateInstalled, events.StateUnavailable))] == [events.StateInstalled]
        assert bob.state is not None and hashlib.sha256(bob.state).digest() == hashlib.sha256(
            blob).digest()
        parts = math.ceil(size / (max_frame // 2 - PART_HEADROOM))  # plus pickle's bytes
        assert comms[0].counters()["state_parts_sent"] == parts
        assert comms[1].counters()["state_parts_received"] == parts
        comms.pop().close()
        # a newcomer whose limit is below the state: refused in one line, none installed
        comms.append(_member(server, path, "carol", carol, max_state=size // 2))
        wait_until(carol.settled, timeout=60, what="carol's answer")
        assert any(isinstance(e, events.StateUnavailable) for e in carol.events)
        assert carol.state is None and comms[1].counters()["states_refused"] == 1
        [said] = [r.getMessage() for r in caplog.records if "cannot be taken" in r.getMessage()]
        assert "more than the limit" in said and "max_state" in said and "\n" not in said
    finally:
        for comm in comms:
            comm.close()
        server.stop()
        thread.join(10)


@pytest.mark.parametrize("sizes", SIZES)
def test_a_stored_state_larger_than_a_frame_is_kept_and_handed_out_in_parts(
        key, tmp_path: Path, sizes) -> None:
    path, secret = key
    max_frame, size = sizes
    store = SQLiteStore(tmp_path / "store.db")
    server = SessionServer(secret, store=store, store_policy=StorePolicy(1000, 1000.0),
                           max_frame=max_frame, heartbeat_timeout=2.0)
    thread = _serve(server)
    blob = os.urandom(size)
    try:
        alice = _member(server, path, "alice", App(blob))
        try:  # the first member: the store asks it for a snapshot at once, in parts
            wait_until(lambda: server.counters().get("store_snapshots") == 1, timeout=60,
                       what="alice's snapshot kept")
        finally:
            alice.close()
        carol = App()
        comm = _member(server, path, "carol", carol)
        try:
            wait_until(carol.settled, timeout=60, what="the stored state")
            [installed] = [e for e in carol.events if isinstance(e, events.StateInstalled)]
            assert installed.source == "store"
            assert carol.state is not None and hashlib.sha256(
                carol.state).digest() == hashlib.sha256(blob).digest()
        finally:
            comm.close()
        assert server.counters()["store_states_sent"] == 1
        assert server.counters().get("store_state_too_large", 0) == 0
    finally:
        server.stop()
        thread.join(10)
