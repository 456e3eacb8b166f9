"""One Host, one poll thread, several members: three hosted members and an ordinary
communicator in one session exchange causally ordered traffic; a hosted member closes
while the others go on; members do not add threads."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from groupcomm.core.messages import ReceivedMessage
from groupcomm.tools.procs import ProcessGroup
from groupcomm.transport.communicator import Communicator
from groupcomm.transport.config import Connection, Listeners
from groupcomm.transport.host import Host
from tests.helpers import wait_until


class Inbox:
    """A message listener keeping payloads in delivery order."""

    def __init__(self) -> None:
        self.got: list[Any] = []
        self.lock = threading.Lock()

    def __call__(self, message: ReceivedMessage) -> None:
        with self.lock:
            self.got.append(message.user_message)

    def payloads(self) -> list[Any]:
        with self.lock:
            return list(self.got)


@pytest.fixture
def host() -> Iterator[Host]:
    with Host(name="test") as started:
        yield started


@pytest.mark.parametrize("routing", ["relayed", "direct"])
def test_hosted_members_and_an_ordinary_one_deliver_in_causal_order(
    group: ProcessGroup, host: Host, routing: str,
) -> None:
    assert group.server is not None
    common = dict(server=group.server.address, key_file=str(group.key_file),
                  causality="vector", routing=routing)
    threads_before = threading.active_count()
    inboxes = {name: Inbox() for name in ("a", "b", "c", "d")}
    a = host.join("a", "s", **common, listeners=Listeners(message=inboxes["a"]))
    threads_with_one = threading.active_count()
    assert threads_with_one <= threads_before + 1  # the host's thread, once
    c = host.join("c", "s", **common, listeners=Listeners(message=inboxes["c"]))

    def reply(message: ReceivedMessage) -> None:  # on the host's thread
        inboxes["b"](message)
        if message.user_message == "m1":
            b.to_others("m2")  # after m1, for everyone

    b = host.join("b", "s", **common, listeners=Listeners(message=reply))
    assert threading.active_count() == threads_with_one  # no thread per member
    with Communicator("d", "s", **common, listeners=Listeners(message=inboxes["d"])) as d:
        wait_until(lambda: all(set(m.members) == {"a", "b", "c", "d"} for m in (a, b, c, d)),
                   what="everyone sees everyone")
        # m1 reaches d late; b's reply m2 (which saw m1) must wait for it at d
        a.set_minimum_delay_to_peer("d", 300)
        a.to_others("m1")
        for name in ("c", "d"):
            wait_until(lambda name=name: inboxes[name].payloads() == ["m1", "m2"],
                       what=f"m1 then m2 at {name}")
        assert d.counters()["delivered"] == 2
        # a hosted member leaves; the others go on, on the same thread
        b.close()
        assert b.closed and b not in host.members
        wait_until(lambda: "b" not in a.members and "b" not in d.members,
                   what="b's leave seen")
        a.set_minimum_delay_to_peer("d", 0)
        c.to_others("m3")
        for name in ("a", "d"):
            wait_until(lambda name=name: inboxes[name].payloads()[-1:] == ["m3"],
                       what=f"m3 at {name}")
        assert inboxes["b"].payloads() == ["m1"]  # b heard nothing after it closed
        assert threading.active_count() == threads_with_one + 1  # d's own thread
    host.close()
    assert a.closed and c.closed and host.members == []
    wait_until(lambda: threading.active_count() <= threads_before, what="threads reaped")


def test_a_host_refuses_a_context_or_loop_of_the_member(host: Host) -> None:
    with pytest.raises(ValueError, match="the host's"):
        host.join(
            "a", "s", server="127.0.0.1:1", key=b"k" * 32,
            connection=Connection(context=object()))


def test_hosted_members_open_a_frame_to_several_of_them_once(group: ProcessGroup,
                                                            host: Host) -> None:
    """A frame from an ordinary member to two hosted ones and itself: the host inflates
    and unpacks it once for both, and each gets every message, in order."""
    assert group.server is not None
    common = dict(server=group.server.address, key_file=str(group.key_file),
                  causality="vector")
    inboxes = {name: Inbox() for name in ("b", "c")}
    b = host.join("b", "s", **common, listeners=Listeners(message=inboxes["b"]))
    c = host.join("c", "s", **common, listeners=Listeners(message=inboxes["c"]))
    with Communicator("a", "s", **common) as a:
        wait_until(lambda: all(set(m.members) == {"a", "b", "c"} for m in (a, b, c)),
                   what="everyone sees everyone")
        sent = [f"m{k}" for k in range(20)]
        for payload in sent:
            a.to_others(payload)
        for name in ("b", "c"):
            wait_until(lambda name=name: inboxes[name].payloads() == sent,
                       what=f"every message at {name}")
    shared = host.sharing
    # each chunk and batch of a's stream to b and c was opened once, taken twice
    assert shared["chunks_reused"] >= 1 and shared["batches_reused"] >= 1
    assert shared["chunks_inflated"] <= shared["chunks_reused"] + 1


@pytest.mark.parametrize("routing", ["relayed", "direct"])
def test_over_the_reliable_layer_a_send_to_several_hosted_members_is_opened_once(
    group: ProcessGroup, host: Host, routing: str,
) -> None:
    """The reliable layer numbers a send to b and c for each, in one frame: it reaches
    the host once per member (through the server, or pushed to each) and the host still
    inflates and unpacks it once for both; the acknowledgements b and c send back let
    nothing be held."""
    from groupcomm.core.selection import RELIABLE, filter_creators
    from groupcomm.transport.config import Pipelines

    assert group.server is not None
    send, receive = filter_creators([RELIABLE])
    common = dict(server=group.server.address, key_file=str(group.key_file),
                  causality="vector", routing=routing,
                  pipelines=Pipelines(extra_send=send, extra_receive=receive))
    inboxes = {name: Inbox() for name in ("b", "c")}
    b = host.join("b", "s", **common, listeners=Listeners(message=inboxes["b"]))
    c = host.join("c", "s", **common, listeners=Listeners(message=inboxes["c"]))
    with Communicator("a", "s", **common) as a:
        wait_until(lambda: all(set(m.members) == {"a", "b", "c"} for m in (a, b, c)),
                   what="everyone sees everyone")
        sent = [f"m{k}" for k in range(20)]
        for payload in sent:
            a.to_others(payload)
        for name in ("b", "c"):
            wait_until(lambda name=name: inboxes[name].payloads() == sent,
                       what=f"every message at {name}")
        wait_until(lambda: not a.held(), what="a's frames acknowledged")
        assert a.counters()["reliable_retransmissions"] == 0
    shared = host.sharing
    assert shared["batches_reused"] >= 1
    if routing == "relayed":  # direct frames go uncompressed by default: no chunks
        assert shared["chunks_reused"] >= 1
        assert shared["chunks_inflated"] <= shared["chunks_reused"] + 1
