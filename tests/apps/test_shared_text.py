"""The shared text's coalesced typing on the in-process network (three replicas, every
frame through the real codec): a run shows at once on the typist's own copy, travels
as one operation, and concurrent runs and edits at one place converge in any delivery
order."""

from __future__ import annotations

import random
import time
from typing import Any

import pytest

from groupcomm.apps.shared_text import SharedText
from groupcomm.replicated.editor import is_presence, presence_slot
from groupcomm.tools.localnet import LocalNetwork

NAMES = ("alice", "bob", "carol")


class LocalCommunicator:
    """What :class:`SharedText` asks of a communicator, over a :class:`LocalNetwork`."""

    def __init__(self, net: LocalNetwork, name: str) -> None:
        self.net = net
        self.name = self.member_id = name
        self.acknowledged_delivery = False

    @property
    def members(self) -> list[str]:
        return list(self.net.nodes)

    @property
    def others(self) -> list[str]:
        return [n for n in self.net.nodes if n != self.name]

    def send(self, destinations: list[str], payload: Any) -> list[Any]:
        return [self.net.send(self.name, payload, destinations)]


class ManualFlusher:
    """Records when a flush was asked for; the test flushes (deterministic)."""

    def __init__(self, shared: SharedText) -> None:
        self.shared = shared
        self.asked: list[float] = []

    def due(self, delay: float) -> None:
        self.asked.append(delay)

    def stop(self) -> None:
        pass


def replicas(module: str = "matrix") -> tuple[LocalNetwork, dict[str, SharedText]]:
    net = LocalNetwork(list(NAMES), module, trace=False)
    shared = {}
    for name in NAMES:
        text = SharedText(name, window=10.0, flusher=ManualFlusher)
        text.attach(LocalCommunicator(net, name))
        net.reactions[name].append(lambda _net, _who, message, t=text: t.on_message(message))
        shared[name] = text
    return net, shared


def values(shared: dict[str, SharedText]) -> list[str]:
    return [s.view()[0] for s in shared.values()]


def test_a_run_shows_at_once_and_travels_as_one_operation() -> None:
    net, shared = replicas()
    alice = shared["alice"]
    for char in "hello":
        alice.insert(char)
    assert alice.view()[:2] == ("hello", 5)  # on the typist's copy at once
    assert net.in_flight == [] and alice.replica.text.value == ""  # nothing sent, not applied
    assert alice._flusher.asked == [10.0]  # one flush asked for, at the window
    alice.flush()
    sent = {frame.message_id for frame in net.in_flight}
    assert len(sent) == 1  # one message: the run
    assert alice.replica.text.value == "hello" and alice.replica.pending is None
    net.run()
    assert values(shared) == ["hello"] * 3
    assert [m.user_message for m in net.deliveries["bob"]] == [("insert", None, "hello")]
    # bob's copy shows alice's cursor after her run
    assert shared["bob"].view()[2] == {"alice": 5}


def test_backspace_takes_back_unsent_characters_and_a_newline_or_move_flushes() -> None:
    net, shared = replicas()
    alice = shared["alice"]
    for char in "teh":
        alice.insert(char)
    alice.backspace()
    alice.backspace()
    assert alice.view()[:2] == ("t", 1) and net.in_flight == []
    alice.insert("h")
    alice.insert("e")
    alice.insert("\n")  # a newline ends the run and travels with it
    assert alice.replica.pending is None and alice.replica.text.value == "the\n"
    alice.insert("x")
    alice.move_to(0)  # a move sends the run first, then the cursor at once
    sent = _sent_by(net, "alice")
    ids = [m.app_message_id for m in sent]
    payloads = [m.user_message for m in sent]
    assert payloads == [("insert", None, "the"), ("insert", f"{ids[0]}+2", "\n"),
                        ("insert", ids[1], "x"), ("cursor", None)]
    assert is_presence(payloads[-1]) and presence_slot(payloads[-1]) == "cursor"
    assert presence_slot(payloads[0]) is None
    net.run()
    assert values(shared) == ["the\nx"] * 3


def test_delete_flushes_first_and_deletes_after_the_run() -> None:
    net, shared = replicas()
    alice = shared["alice"]
    alice.insert("abc")  # a paste: sent at once
    alice.move_to(1)
    alice.insert("X")
    alice.delete()  # deletes "b", after the typed X
    net.run()
    assert values(shared) == ["aXc"] * 3


def test_an_edit_delivered_at_the_typists_place_asks_for_a_flush_now() -> None:
    net, shared = replicas()
    alice, bob = shared["alice"], shared["bob"]
    alice.insert("ab")  # a paste: sent
    net.run()
    alice.move_to(1)
    alice.insert("1")
    alice.insert("2")  # pending after "a"
    bob.move_to(1, announce=False)
    bob.insert("X")
    bob.flush()  # bob's insert after "a" too
    elsewhere = len(alice._flusher.asked)
    while net.in_flight:
        frame = net.deliver(0)
        if frame.dest == "alice" and not frame.control:
            break
    assert alice._flusher.asked[elsewhere:] == [0.0]  # flush now: same place
    # until then the run is drawn right after its anchor, before bob's X
    assert alice.view()[:2] == ("a12Xb", 3)
    alice.flush()
    net.run()
    assert values(shared) == ["a12Xb"] * 3


def test_a_remote_edit_elsewhere_does_not_flush() -> None:
    net, shared = replicas()
    alice, bob = shared["alice"], shared["bob"]
    alice.insert("ab")
    net.run()
    alice.move_to(2)
    alice.insert("!")
    asked = len(alice._flusher.asked)
    bob.move_to(0, announce=False)
    bob.insert(">")
    bob.flush()
    net.run()
    assert alice._flusher.asked[asked:] == []
    assert alice.view()[:2] == (">ab!", 4)
    alice.flush()
    net.run()
    assert values(shared) == [">ab!"] * 3


@pytest.mark.parametrize("module", ["matrix", "ks"])
@pytest.mark.parametrize("seed", range(4))
def test_three_typists_at_one_place_converge_in_any_delivery_order(module: str,
                                                                   seed: int) -> None:
    net, shared = replicas(module)
    rng = random.Random(seed)
    shared["alice"].insert("start\n")
    net.run()
    for text in shared.values():
        text.move_to(3, announce=False)
    for _ in range(120):
        who = shared[rng.choice(NAMES)]
        roll = rng.random()
        if roll < 0.6:
            who.insert(rng.choice("abcdefgh "))
        elif roll < 0.7:
            who.backspace()
        elif roll < 0.78:
            who.delete()
        elif roll < 0.85:
            who.move_to(rng.randint(0, len(who.view()[0])), announce=rng.random() < 0.5)
        elif roll < 0.95:
            who.flush()
        if net.in_flight and rng.random() < 0.5:
            net.deliver(rng.choice(net.arrivable()))
    for text in shared.values():
        text.flush()
    net.run(rng)
    final = values(shared)
    assert len(set(final)) == 1, final
    assert all(t.replica.failures == 0 for t in shared.values())
    assert [t.replica.text.value for t in shared.values()] == final


def test_the_flushing_thread_sends_a_run_when_its_window_has_passed() -> None:
    net = LocalNetwork(["alice", "bob"], "matrix", trace=False)
    alice = SharedText("alice", window=0.02)
    alice.attach(LocalCommunicator(net, "alice"))
    try:
        alice.insert("h")
        alice.insert("i")
        deadline = time.monotonic() + 10
        while alice.replica.pending is not None and time.monotonic() < deadline:
            time.sleep(0.005)
        assert alice.replica.pending is None and alice.replica.text.value == "hi"
        assert [f.dest for f in net.in_flight] == ["bob"]
    finally:
        alice.close()


def test_a_negative_window_is_refused() -> None:
    with pytest.raises(ValueError, match="window must be >= 0"):
        SharedText("alice", window=-1)


def _sent_by(net: LocalNetwork, name: str) -> list[Any]:
    """Messages ``name`` sent, oldest first (as delivered to another member)."""
    other = next(n for n in NAMES if n != name)
    net.run()
    return [m for m in net.deliveries[other] if m.sender == name]



@pytest.mark.parametrize("value", ["-5", "20000", "soon"])
def test_a_bad_coalescing_window_is_one_line(value: str, capsys) -> None:
    from groupcomm.apps import edit

    assert edit.main(["--name", "alice", "--session", "s", "--batch",
                      "--coalesce", value]) != 0
    error = capsys.readouterr().err.strip()
    assert "--coalesce" in error and len(error.splitlines()) == 1


def test_a_run_whose_anchor_was_deleted_meanwhile_goes_after_the_visible_character() -> None:
    """The run's tag covers the delete: a member that collected the deleted character
    (causally stable) must still be able to place it."""
    from groupcomm.wire.envelopes import decode_message

    net, shared = replicas()
    alice, bob = shared["alice"], shared["bob"]
    alice.insert("ab")  # a paste: sent
    net.run()
    a_id = alice.replica.text.anchor(1)
    alice.move_to(2)
    alice.insert("!")  # pending after "b"
    bob.move_to(2, announce=False)
    bob.backspace()  # bob deletes "b"
    net.run()
    assert alice.view()[0] == "a!"
    sent = len(net.in_flight)
    alice.flush()
    op = decode_message(net.in_flight[sent].frame).user_message
    assert op[:2] == ("insert", a_id)
    net.run()
    assert values(shared) == ["a!"] * 3


class AcknowledgingCommunicator(LocalCommunicator):
    """A :class:`LocalCommunicator` with acknowledged delivery: records each count."""

    def __init__(self, net: LocalNetwork, name: str) -> None:
        super().__init__(net, name)
        self.acknowledged_delivery = True
        self.acknowledged: list[int] = []

    def acknowledge(self, count: int) -> None:
        self.acknowledged.append(count)


def test_with_acknowledged_delivery_each_message_is_acknowledged_once_applied() -> None:
    net = LocalNetwork(list(NAMES), "matrix", trace=False)
    texts = {name: SharedText(name, window=0, flusher=ManualFlusher) for name in NAMES}
    carol = texts["carol"]
    seen: list[str] = []
    for name, text in texts.items():
        net.reactions[name].append(lambda _net, _who, message, t=text: t.on_message(message))
    net.reactions["carol"].append(lambda _net, _who, _message: seen.append(carol.view()[0]))
    for name in ("alice", "bob"):
        texts[name].attach(LocalCommunicator(net, name))
    texts["alice"].insert("hi")
    net.run()  # handed to carol before she is attached: counted, acknowledged at attach
    communicator = AcknowledgingCommunicator(net, "carol")
    carol.attach(communicator)
    assert communicator.acknowledged == [1]
    texts["bob"].move_to(2, announce=False)
    texts["bob"].insert("!")
    net.run()
    # acknowledged after it was applied: what a send of carol's is tagged with
    assert communicator.acknowledged == [1, 2]
    assert seen == ["hi", "hi!"]


class CutOffCommunicator:
    """A communicator whose member id changes as a return after being taken for gone
    does; every send is recorded (what reaches the others is the test's to say)."""

    acknowledged_delivery = False

    def __init__(self, name: str) -> None:
        self.name = self.member_id = name
        self.members = [name, "bob"]
        self.sent: list[tuple[str, Any]] = []
        self.clock: dict[str, int] = {"bob": 1}

    @property
    def others(self) -> list[str]:
        return [m for m in self.members if m != self.member_id]

    def send(self, destinations: list[str], payload: Any) -> list[Any]:
        from types import SimpleNamespace

        self.clock[self.member_id] = self.clock.get(self.member_id, 0) + 1
        message_id = f"{self.member_id}#{self.clock[self.member_id]}"
        self.sent.append((message_id, payload))
        return [SimpleNamespace(message_id=message_id, vc=dict(self.clock))]


def test_back_as_a_new_member_the_edits_wait_for_the_text_then_go_once_and_are_said() -> None:
    from groupcomm.core.messages import Tag
    from groupcomm.replicated import EditorReplica

    bob = EditorReplica("bob", lambda payload: ("bob#1", Tag({"bob": 1})))
    bob.insert("hi")
    comm = CutOffCommunicator("alice")
    alice = SharedText("alice", window=0.0)
    alice.attach(comm)
    with alice.lock:
        alice.replica.delivered("bob", ("insert", None, "hi"), Tag({"bob": 1}), "bob#1")
    alice.move_to(2, announce=False)
    alice.insert("X")                       # alice#1: never reaches bob
    comm.member_id = "alice~2"
    comm.members = ["bob", "alice~2"]
    alice.client_joined("alice~2", "default", "s", False, False, ["bob", "alice~2"])
    assert alice.replica.offline and alice.replica.me == "alice~2"
    alice.insert("Y")                       # waits for the text
    assert [payload for _, payload in comm.sent] == [("insert", "bob#1+1", "X")]
    assert alice.view()[0] == "hiXY"
    alice.install(bob.snapshot().state)
    assert comm.sent[1:] == [("alice~2#1", ("insert", "bob#1+1", "XY"))]
    assert alice.view()[0] == "hiXY" and alice.position == 4 and not alice.replica.offline
    assert alice.notice.startswith("back: 1 edit(s) made while cut off sent again (2 "
                                   "character(s) typed)")


def test_a_store_of_another_generation_gets_the_unconfirmed_edits_again_onto_its_text() -> None:
    """Back to a session whose store was replaced (another generation): the text comes
    afresh by state transfer; the edits no one confirmed, and those typed meanwhile,
    go again onto it as new operations, once (docs/storage.md, "Generations")."""
    from groupcomm.core.messages import Tag
    from groupcomm.protocol.session_events import StoreGenerationChanged
    from groupcomm.replicated import EditorReplica

    bob = EditorReplica("bob", lambda payload: ("bob#1", Tag({"bob": 1})))
    bob.insert("hi")  # the replaced store's text: bob's "hi" only
    comm = CutOffCommunicator("alice")
    alice = SharedText("alice", window=0.0)
    alice.attach(comm)
    with alice.lock:
        alice.replica.delivered("bob", ("insert", None, "hi"), Tag({"bob": 1}), "bob#1")
    alice.move_to(2, announce=False)
    alice.insert("X")                       # alice#1: never confirmed by bob
    alice.on_event(StoreGenerationChanged(member="alice", previous="a1", generation="b2"))
    assert alice.replica.offline and "store was replaced" in alice.notice
    alice.insert("Y")                       # waits for the text
    assert [payload for _, payload in comm.sent] == [("insert", "bob#1+1", "X")]
    alice.install(bob.snapshot().state)
    assert comm.sent[1:] == [("alice#2", ("insert", "bob#1+1", "XY"))]
    assert alice.view()[0] == "hiXY" and alice.position == 4 and not alice.replica.offline
