"""``holds_sends`` (what ``Communicator.flush`` waits on) says what ``held()`` says about
the member's own unsent messages, for the modules that answer it without listing them
and for the default."""

from __future__ import annotations

import pytest

from groupcomm.core.messages import SentMessage
from groupcomm.tools.localnet import LocalNetwork


def _listed(net: LocalNetwork, name: str) -> bool:
    return any(isinstance(m, SentMessage) for m in net.manager(name).held())


@pytest.mark.parametrize("module", ["mfss", "cykas", "matrix", "fifo"])
def test_holds_sends_agrees_with_held(module: str) -> None:
    net = LocalNetwork(["a", "b", "c"], module, trace=False)
    assert not net.nodes["a"].holds_sends()
    for i in range(5):
        net.send("a", f"a{i}", ["b"])
        net.send("c", f"c{i}", ["b"])
    states = []
    while True:
        for name in net.nodes:
            answer = net.nodes[name].holds_sends()
            assert answer == _listed(net, name), (module, name)
            states.append(answer)
        if not net.in_flight:
            break
        net.deliver(len(net.in_flight) - 1)  # newest first: receivers hold some
    # the sender-side modules hold a's later messages until b's ACKs come back
    assert any(states) == (module in ("mfss", "cykas"))
    assert not any(node.holds_sends() for node in net.nodes.values())
