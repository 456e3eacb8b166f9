"""The web gateway's chat survives everyone leaving, the gateway stopping and the server
being killed (-9): a real ``groupcomm serve --store``, real ``groupcomm web`` processes,
a WebSocket client playing the tabs (as tests/web/test_gateway.py does)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import aiohttp
import pytest

from groupcomm.tools.procs import ProcessGroup
from tests.web.conftest import GatewayProcess
from tests.web.test_gateway import connect


@pytest.mark.long
def test_a_tab_after_the_gateway_and_the_server_restarted_gets_the_chat(
        tmp_path: Path) -> None:
    with ProcessGroup(tmp_path / "run", server_extra=[
            "--heartbeat-timeout", "3", "--store", str(tmp_path / "sessions.db")]) as group:
        first = GatewayProcess(group, tmp_path / "first", users=("ann", "ben", "cat"))
        try:
            async def talk() -> None:
                async with aiohttp.ClientSession() as session:
                    ann = await connect(session, first, "im", "ann")
                    await ann.next(lambda e: e["type"] == "welcome")
                    ben = await connect(session, first, "im", "ben")
                    await ben.next(lambda e: e["type"] == "welcome")
                    await ann.next(lambda e: e["type"] == "joined")
                    # ben answers what he got: the order is causal, so the server's
                    # (and the store's) order too ("sent" only says the tab's member
                    # took the message, which may leave later)
                    for tab, other, text in ((ann, ben, "hello from ann"),
                                             (ben, ann, "hello from ben")):
                        await tab.ws.send_json({"type": "say", "applied": 0, "text": text,
                                                "to": None})
                        await tab.next(lambda e: e["type"] == "sent")
                        await other.next(lambda e: e["type"] == "deliver")
                    await ann.ws.close()
                    await ben.ws.close()

            asyncio.run(asyncio.wait_for(talk(), 120))
        finally:
            first.stop()
        assert group.server is not None
        group.server.kill()
        group.start_server()
        second = GatewayProcess(group, tmp_path / "second", users=("ann", "ben", "cat"))
        try:
            async def come_back() -> dict:
                async with aiohttp.ClientSession() as session:
                    cat = await connect(session, second, "im", "cat")
                    welcome = await cat.next(lambda e: e["type"] == "welcome")
                    await cat.ws.close()
                    return welcome

            welcome = asyncio.run(asyncio.wait_for(come_back(), 120))
        finally:
            second.stop()
    texts = [entry[1] for entry in welcome["state"]["history"]]
    assert texts == ["hello from ann", "hello from ben"], welcome
