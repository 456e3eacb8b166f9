"""Two gateways serving one session (docs/deploy.md, "Tabs of one session on several
gateways"): a person's tabs on both get distinct member names (the second gateway is
refused the first's name by the session and takes the next; later it skips the names
its own members see), a login token works on either, what a tab says on one gateway
reaches the tabs on the other, and a tab joining through the other gateway gets the
conversation so far."""

from __future__ import annotations

import shutil
from collections.abc import Iterator

import aiohttp
import pytest

from groupcomm.core.member_ids import display_name
from groupcomm.tools.procs import ProcessGroup
from groupcomm.transport.communicator import JoinError
from groupcomm.web.tab_names import is_name_taken, names_in_use
from tests.web.conftest import GatewayProcess
from tests.web.test_gateway import Tab, connect, run


@pytest.fixture(scope="module")
def two_gateways(session_group: ProcessGroup, tmp_path_factory: pytest.TempPathFactory
                 ) -> Iterator[tuple[GatewayProcess, GatewayProcess]]:
    started: list[GatewayProcess] = []
    try:
        first_dir = tmp_path_factory.mktemp("gateway1")
        first = GatewayProcess(session_group, first_dir, session="shared",
                               users=("ann", "ben"))
        started.append(first)
        second_dir = tmp_path_factory.mktemp("gateway2")
        shutil.copy(first.users_file, second_dir / "users.json")  # the same users
        started.append(GatewayProcess(session_group, second_dir, session="shared",
                                      tokens=first.tokens))
        yield started[0], started[1]
    finally:
        for gateway in started:
            gateway.stop()


def test_names_in_use_and_a_taken_name() -> None:
    assert names_in_use([["ann", "ann:2~3"], ["ben~2"]]) == {"ann", "ann:2", "ben"}
    assert is_name_taken(JoinError("duplicate_name: client name 'ann' is taken in ..."))
    assert not is_name_taken(JoinError("wrong_key: the session server answers, but ..."))


def test_a_persons_tabs_on_two_gateways_are_distinct_members_of_one_session(
        two_gateways: tuple[GatewayProcess, GatewayProcess]) -> None:
    first, second = two_gateways

    async def welcome(tab: Tab) -> dict:
        return await tab.next(lambda e: e["type"] in ("welcome", "error"), "welcome")

    async def scenario() -> None:
        async with aiohttp.ClientSession() as client:
            one = await connect(client, first, "im", "ann")
            assert display_name((await welcome(one))["member"]) == "ann"
            # the same token on the other gateway: "ann" is held there, so "ann:2"
            two = await connect(client, second, "im", "ann")
            got = await welcome(two)
            assert (display_name(got["member"]), got["tab"]) == ("ann:2", 2), got
            # the second gateway's member now sees "ann": a third tab skips it unasked
            three = await connect(client, second, "im", "ann")
            got = await welcome(three)
            assert (display_name(got["member"]), got["tab"]) == ("ann:3", 3), got
            ben = await connect(client, first, "im", "ben")
            ben_id = (await welcome(ben))["member"]
            for tab in (two, three):
                await tab.next(lambda e: e["type"] == "joined" and e["member"] == ben_id,
                               "ben joined")
            await ben.ws.send_json({"type": "say", "applied": 0, "text": "across"})
            for tab in (one, two, three):
                got = await tab.next(lambda e: e["type"] == "deliver", "ben's line")
                assert got["text"] == "across" and got["sender"] == ben_id
                # what a tab applied is what its member hands a newcomer
                await tab.ws.send_json({"type": "applied", "n": got["n"]})
            # a tab joining through the other gateway gets the conversation so far
            late = await connect(client, second, "im", "ben")
            got = await welcome(late)
            assert display_name(got["member"]) == "ben:2", got
            assert [entry[1] for entry in got["state"]["history"]] == ["across"], got
            for tab in (one, two, three, ben, late):
                await tab.ws.close()

    run(scenario())
    assert second.stats()["counters"].get("tab_name_taken") == 1
    assert not first.stats()["counters"].get("tab_name_taken")


def test_a_cursor_on_one_gateway_is_shown_at_a_tab_on_the_other(
        two_gateways: tuple[GatewayProcess, GatewayProcess]) -> None:
    """Presence (the editor's cursors) is a session message like any other: a cursor
    moved in a tab on one gateway reaches a tab on the other."""
    first, second = two_gateways

    async def scenario() -> None:
        async with aiohttp.ClientSession() as client:
            ann = await connect(client, first, "edit", "ann")
            ann_id = (await ann.next(lambda e: e["type"] == "welcome", "welcome"))["member"]
            ben = await connect(client, second, "edit", "ben")
            await ben.next(lambda e: e["type"] == "welcome", "welcome")
            await ann.next(lambda e: e["type"] == "joined", "ben joined")
            await ann.ws.send_json({"type": "cursor", "applied": 0, "anchor": None})
            got = await ben.next(lambda e: e["type"] == "deliver" and "cursor" in e,
                                 "ann's cursor")
            assert got["sender"] == ann_id and got["cursor"] is None
            for tab in (ann, ben):
                await tab.ws.close()

    run(scenario())
