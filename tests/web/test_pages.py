"""The gateway's HTTP side in-process (no session server): pages, static files, a page
the module cannot carry, and what it refuses before anyone joins."""

from __future__ import annotations

import asyncio
from pathlib import Path

import aiohttp
import pytest
from aiohttp.test_utils import TestClient, TestServer

import groupcomm.web.gateway as gateway_module
from groupcomm.web.auth import Users
from groupcomm.web.gateway import Gateway


def run_with_client(tmp_path: Path, check, **options) -> None:
    users = Users(tmp_path / "users.json")
    token = users.add("ann")

    async def scenario() -> None:
        gateway = Gateway(users, "s", communicator_kwargs={}, share_thread=False, **options)
        async with TestClient(TestServer(gateway.app)) as client:
            await check(client, gateway, token)

    asyncio.run(asyncio.wait_for(scenario(), 60))


def test_pages_and_static_files_are_served_and_nothing_else(tmp_path: Path) -> None:
    async def check(client: TestClient, gateway: Gateway, token: str) -> None:
        for path, needle in (("/", "login link"), ("/im", "im.js"), ("/edit", "edit.js"),
                             ("/static/text_sequence.js", "export class TextSequence"),
                             ("/static/codemirror.js", "EditorView")):
            answer = await client.get(path)
            assert answer.status == 200 and needle in await answer.text()
        for path in ("/static/..%2Fgateway.py", "/static/gateway.py", "/static/.hidden.js",
                     "/static/missing.js", "/ws/other"):
            assert (await client.get(path)).status == 404, path

    run_with_client(tmp_path, check)


def test_without_its_codemirror_bundle_the_editor_page_says_how_to_build_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gateway_module, "BUNDLE", "codemirror-not-built.js")

    async def check(client: TestClient, gateway: Gateway, token: str) -> None:
        for path in ("/edit", "/static/codemirror-not-built.js"):
            answer = await client.get(path)
            assert answer.status == 503
            assert "npm ci && npm run build" in await answer.text()
        assert (await client.get("/im")).status == 200  # the other pages need no bundle

    run_with_client(tmp_path, check)


def test_the_editor_page_is_refused_with_the_reason_when_the_module_cannot_carry_it(
        tmp_path: Path) -> None:
    async def check(client: TestClient, gateway: Gateway, token: str) -> None:
        ws = await client.ws_connect("/ws/edit")
        await ws.send_json({"type": "hello", "user": "ann", "token": token})
        answer = await ws.receive_json(timeout=30)
        assert answer == {"type": "error", "ref": None, "error":
                          "the editor cannot run here: fifo gives no causal order"}
        assert (await ws.receive(timeout=30)).type in (aiohttp.WSMsgType.CLOSE,
                                                        aiohttp.WSMsgType.CLOSED)
        # the first message must be a login
        ws = await client.ws_connect("/ws/im")
        await ws.send_json({"type": "say", "applied": 0, "text": "hi", "to": None})
        answer = await ws.receive_json(timeout=30)
        assert answer["error"] == "the first message must be a hello with user and token"
        assert gateway.counters["edit_refused"] == 1 and gateway.counters["malformed"] == 1
        assert gateway.tabs == {}

    run_with_client(tmp_path, check, edit_refusal="fifo gives no causal order",
                    module="fifo")
