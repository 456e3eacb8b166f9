"""The shared text over real communicators (ZeroMQ, a server process): random
concurrent edits with delays and jitter converge; a late joiner continues from the
snapshot, and its edits are tagged after everything the snapshot holds."""

from __future__ import annotations

import random
import time
from collections.abc import Iterator

import pytest

from groupcomm.apps.shared_text import SharedText
from groupcomm.tools.procs import ProcessGroup
from groupcomm.transport.communicator import Communicator
from groupcomm.transport.config import Listeners, StateTransfer


@pytest.fixture
def editors(group: ProcessGroup, tmp_path) -> Iterator:
    started: list[Communicator] = []

    def start(name: str, module: str) -> SharedText:
        shared = SharedText(name)
        communicator = Communicator(
            name, "paper", server=group.server.address, key_file=str(group.key_file),
            causality=module, trace_dir=str(tmp_path / "traces"),
            state=StateTransfer(provider=shared.snapshot, consumer=shared.install),
            listeners=Listeners(session=shared, message=shared.on_message))
        started.append(communicator)
        assert communicator.wait_for_state(30)
        shared.attach(communicator)
        return shared

    yield start
    for communicator in started:
        communicator.close()


def settle(replicas: list[SharedText], expected_applied: int | None = None,
           timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if len({r.replica.text.value for r in replicas}) == 1 and all(
                not r.communicator.held() for r in replicas):
            if expected_applied is None or all(r.replica.applied >= expected_applied
                                               for r in replicas):
                return
        time.sleep(0.05)
    pytest.fail("replicas did not converge: " + repr([r.replica.text.value for r in replicas]))


@pytest.mark.parametrize("module", ["matrix", "vector"])
def test_random_concurrent_edits_with_delays_and_jitter_converge(editors, module) -> None:
    names = ["p1", "p2", "p3"]
    editing = [editors(name, module) for name in names]
    editing[0].communicator.set_minimum_delay_to_peer("p2", 150)
    for shared in editing:
        shared.communicator.set_delay_variation(30)
    rng = random.Random(7)
    for _ in range(150):
        shared = rng.choice(editing)
        with shared.lock:
            length = shared.replica.text.visible_length()
        if length and rng.random() < 0.3:
            shared.move_to(rng.randrange(length))
            shared.backspace() if rng.random() < 0.5 else shared.delete()
        else:
            shared.move_to(rng.randint(0, length))
            shared.insert(rng.choice(["a", "bc", "def"]))
        time.sleep(rng.random() * 0.01)
    settle(editing, expected_applied=sum(len(s.replica.own_ids) for s in editing))
    assert all(s.replica.failures == 0 for s in editing)
    assert len(editing[0].replica.text.value) > 50


def test_a_late_joiners_edit_waits_for_what_its_snapshot_holds(editors) -> None:
    a, b, c = (editors(name, "matrix") for name in ("a", "b", "c"))
    a.communicator.set_minimum_delay_to_peer("c", 1500)   # "xyz" reaches c late
    a.insert("xyz")
    d = editors("d", "matrix")                            # a gives d the text with "xyz"
    assert d.replica.text.value == "xyz"
    tag_of_z = list(a.replica.text.items())[2][1]         # (stamp, id) of "z"
    d.move_to(3)
    d.insert("!")                                         # after "z", which c lacks yet
    assert list(d.replica.text.items())[3][1] > tag_of_z  # tagged after the snapshot
    settle([a, b, c, d])
    assert c.replica.text.value == "xyz!" and c.replica.failures == 0


def test_a_typist_filling_its_send_queue_beside_an_editor_never_blocks_its_deliveries(
        group: ProcessGroup, tmp_path) -> None:
    """Two editors typing as fast as they can with a send queue of 20: a delivery to the
    typist needs the text's lock, which the typing thread takes for each edit. The
    typing thread waits for room before the lock, never under it, so the two never wait
    for each other, and both texts converge."""
    from groupcomm.transport.config import Limits

    texts, comms = [], []
    try:
        for name in ("fast", "other"):
            shared = SharedText(name)
            comm = Communicator(
                name, "queue", server=group.server.address, key_file=str(group.key_file),
                causality="matrix", limits=Limits(max_pending=20, send_timeout=20.0),
                state=StateTransfer(provider=shared.snapshot, consumer=shared.install),
                listeners=Listeners(session=shared, message=shared.on_message))
            comms.append(comm)
            assert comm.wait_for_state(30)
            shared.attach(comm)
            texts.append(shared)
        rng = random.Random(3)
        for k in range(3000):
            shared = texts[k % 7 == 0]  # the other types too, so deliveries keep coming
            with shared.lock:
                length = shared.replica.text.visible_length()
            shared.move_to(rng.randint(0, length), announce=False)
            shared.insert("ab"[k % 2])
        settle(texts, expected_applied=sum(len(s.replica.own_ids) for s in texts), timeout=60)
        assert len(texts[0].replica.text.value) == 3000
    finally:
        for comm in comms:
            comm.close()
