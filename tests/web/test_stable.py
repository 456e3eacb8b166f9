"""A tab keeps what the gateway answered as sent until every receiver's process has it
(docs/web.md, "Kept until the session has it"): the bookkeeping (``Receipts``), and the
gateway's ``stable`` events and repeated lines, with a WebSocket client playing the tab."""

from __future__ import annotations

from collections.abc import Iterator

import aiohttp
import pytest

from groupcomm.tools.procs import ProcessGroup
from groupcomm.web.receipts import Receipts
from tests.web.conftest import GatewayProcess
from tests.web.test_gateway import connect, run, two_tabs


def test_a_message_is_stable_once_every_destination_of_every_copy_has_it() -> None:
    receipts = Receipts("ann")
    assert not receipts.sent("ann#1", [("ann#1", ("ben", "cat", "ann"))])
    assert not receipts.sent("ann#2", [("ann#2", ("ben",)), ("ann#2.b", ("cat",))])
    assert receipts.acknowledged("ben", ["ann#1", "ann#2"]) == []
    assert receipts.acknowledged("ben", ["ann#1"]) == []  # a repeat changes nothing
    assert receipts.acknowledged("cat", ["ann#2.b", "ann#1"]) == ["ann#2", "ann#1"]
    assert len(receipts) == 0
    assert receipts.acknowledged("cat", ["ann#1", "unknown"]) == []


def test_alone_a_message_is_stable_at_once_and_a_leaver_is_waited_for_no_more() -> None:
    receipts = Receipts("ann")
    assert receipts.sent("ann#1", [("ann#1", ("ann",))])
    assert not receipts.sent("ann#2", [("ann#2", ("ben", "cat"))])
    assert not receipts.sent("ann#3", [("ann#3", ("ben",))])
    assert receipts.acknowledged("ben", ["ann#2"]) == []
    assert receipts.left("cat") == ["ann#2"]
    assert receipts.left("ben") == ["ann#3"]


def test_past_the_limit_the_oldest_is_forgotten_and_counted() -> None:
    receipts = Receipts("ann", limit=2)
    for n in range(1, 4):
        receipts.sent(f"ann#{n}", [(f"ann#{n}", ("ben",))])
    assert len(receipts) == 2 and receipts.forgotten == 1
    assert receipts.acknowledged("ben", ["ann#1", "ann#2", "ann#3"]) == ["ann#2", "ann#3"]


@pytest.fixture(scope="module")
def gateway(session_group: ProcessGroup, tmp_path_factory: pytest.TempPathFactory
            ) -> Iterator[GatewayProcess]:
    process = GatewayProcess(session_group, tmp_path_factory.mktemp("gateway"),
                             users=("ann", "ben", "cat"))
    try:
        yield process
    finally:
        process.stop()


def test_lines_and_edits_are_said_stable_once_the_others_have_them(
        gateway: GatewayProcess) -> None:
    async def scenario() -> None:
        async with aiohttp.ClientSession() as session:
            ann, _, ben = await two_tabs(session, gateway, "im", "ann", "ben")
            for to, line in ((None, "l-public"), ("ben", "l-private")):
                await ann.ws.send_json({"type": "say", "applied": 0, "text": line,
                                        "to": to, "local": line, "line": line})
                sent = await ann.next(lambda e: e["type"] == "sent", "the answer")
                stable = await ann.next(lambda e: e["type"] == "stable", "stable")
                assert stable["ids"] == [sent["id"]]
                got = await ben.next(lambda e: e["type"] == "deliver", "the line")
                assert (got["text"], got["line"]) == (line, line)  # its lasting id
            cat, _, dan = await two_tabs(session, gateway, "edit", "cat", "ann")
            await cat.ws.send_json({"type": "edit", "applied": 0, "local": "~L1",
                                    "op": ["insert", None, "hi"]})
            sent = await cat.next(lambda e: e["type"] == "sent", "the edit's answer")
            stable = await cat.next(lambda e: e["type"] == "stable", "the edit stable")
            assert stable["ids"] == [sent["id"]]
            assert gateway.stats()["receipts"] == {"waiting": 0, "forgotten": 0}
            for tab in (ann, ben, cat, dan):
                await tab.ws.close()

    run(scenario())


def test_a_line_sent_again_under_its_lasting_id_reaches_a_tab_once(
        gateway: GatewayProcess) -> None:
    """The tab sends a kept line again after its gateway died; one that had arrived
    the first time comes to the other tabs as a repeat (counted, no text), and the
    conversation a newcomer gets holds it once."""
    async def scenario() -> None:
        async with aiohttp.ClientSession() as session:
            ann, _, ben = await two_tabs(session, gateway, "im", "ann", "ben")
            for _ in range(2):
                await ann.ws.send_json({"type": "say", "applied": 0, "text": "once",
                                        "to": None, "local": "c1", "line": "kept-1"})
            first = await ben.next(lambda e: e["type"] == "deliver", "the line")
            again = await ben.next(lambda e: e["type"] == "deliver", "the repeat")
            assert first["text"] == "once" and not first.get("repeat")
            assert again["repeat"] is True and "text" not in again
            assert again["n"] == first["n"] + 1  # counted: the tab acknowledges it
            await ben.ws.send_json({"type": "applied", "n": again["n"]})
            cat = await connect(session, gateway, "im", "cat")
            welcome = await cat.next(lambda e: e["type"] == "welcome", "cat's welcome")
            assert [e[1] for e in welcome["state"]["history"]].count("once") == 1
            for tab in (ann, ben, cat):
                await tab.ws.close()

    run(scenario())


def test_a_gateways_delay_to_a_person_skips_that_persons_own_tab() -> None:
    """``groupcomm web --delay amy=MS`` delays every tab's frames to amy; amy's own tab
    on that gateway has none to delay (and must still join)."""
    from apps.session_options import SessionOptions

    class Member:
        def __init__(self, name: str) -> None:
            self.name, self.member_id, self.delays = name, f"{name}~2", []

        def set_minimum_delay_to_peer(self, peer: str, ms: float) -> None:
            self.delays.append((peer, ms))

    options = SessionOptions(selection=None, communicator_kwargs={},  # type: ignore[arg-type]
                             delays=[("amy", 1500.0), ("amy~2", 10.0)], jitter=0.0)
    cat, amy = Member("cat"), Member("amy")
    options.inject_delays(cat)
    options.inject_delays(amy)
    assert cat.delays == [("amy", 1500.0), ("amy~2", 10.0)]
    assert amy.delays == []
