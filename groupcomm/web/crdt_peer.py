"""The side-by-side peer of the capacity bench: pycrdt-websocket's server (its
``WebsocketServer`` and rooms, on aiohttp WebSockets; one room a session) under the same
scripted load, typed by Yjs clients in Python (pycrdt documents speaking the Yjs sync
protocol). ``python -m groupcomm.web.crdt_peer --http 127.0.0.1:0`` runs the server.

A keystroke inserts ``id|`` into the room's shared text (the id tells the receivers
which keystroke it was; a few characters more than one key, the same update and relay
work); its latency runs from the insert to each other client of the room seeing it."""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import time
from collections.abc import Callable
from typing import Any

from groupcomm.tools.procstat import ProcessSample
from groupcomm.web.capacity import (
    DRAIN_TIMEOUT,
    JOIN_TIMEOUT,
    WARM_UP,
    Progress,
    Step,
    close_all,
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m groupcomm.web.crdt_peer",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--http", default="127.0.0.1:0", metavar="HOST:PORT")
    return parser


class _Channel:
    """An aiohttp WebSocket as pycrdt's ``Channel``."""

    def __init__(self, ws: Any, path: str) -> None:
        self._ws = ws
        self._path = path

    @property
    def path(self) -> str:
        return self._path

    def __aiter__(self) -> _Channel:
        return self

    async def __anext__(self) -> bytes:
        try:
            return await self.recv()
        except Exception:  # closed: the room stops serving this client
            raise StopAsyncIteration() from None

    async def send(self, message: bytes) -> None:
        await self._ws.send_bytes(message)

    async def recv(self) -> bytes:
        from aiohttp import WSMsgType

        message = await self._ws.receive()
        if message.type != WSMsgType.BINARY:
            raise ConnectionError("closed")
        return message.data


async def _serve(http: str) -> None:
    from aiohttp import web
    from pycrdt.websocket import WebsocketServer

    host, _, port = http.rpartition(":")
    server = WebsocketServer(rooms_ready=True, auto_clean_rooms=False)

    async def room(request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse(max_msg_size=0)
        await ws.prepare(request)
        await server.serve(_Channel(ws, request.path))
        return ws

    app = web.Application()
    app.router.add_get("/{room}", room)
    async with server:
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, host or "127.0.0.1", int(port))
        await site.start()
        bound = site._server.sockets[0].getsockname()  # noqa: SLF001 - port 0's choice
        print(f"listening on http://{bound[0]}:{bound[1]}", flush=True)
        await asyncio.Event().wait()


class _YClient:
    """One scripted Yjs client of a room."""

    def __init__(self, room: str, number: int, sent_at: dict[str, float]) -> None:
        from pycrdt import Doc, Text

        self.room = room
        self.number = number
        self.doc = Doc()
        self.text = self.doc.get("text", type=Text)
        self.sent_at = sent_at  # shared by the clients: key id -> when it was typed
        self.arrivals: list[tuple[str, float]] = []
        self.synced = asyncio.Event()
        self.typed = 0
        self.ws: Any = None
        self.text.observe(self._changed)
        self._own = False

    def _changed(self, event: Any) -> None:
        if self._own:
            return
        now = time.perf_counter()
        for part in event.delta:
            inserted = part.get("insert") if isinstance(part, dict) else None
            if isinstance(inserted, str):
                self.arrivals.extend((key, now) for key in inserted.split("|") if key)

    async def open(self, http: Any, url: str) -> None:
        host = url.split("//", 1)[1]
        self.ws = await http.ws_connect(f"ws://{host}/{self.room}", max_msg_size=0)

    async def read(self) -> None:
        from aiohttp import WSMsgType
        from pycrdt import YMessageType, YSyncMessageType, handle_sync_message

        async for message in self.ws:
            if message.type != WSMsgType.BINARY:
                continue
            data = message.data
            if data and data[0] == YMessageType.SYNC:
                reply = handle_sync_message(data[1:], self.doc)
                if reply is not None:
                    await self.ws.send_bytes(reply)
                if data[1] == YSyncMessageType.SYNC_STEP2:
                    self.synced.set()

    async def hello(self) -> None:
        from pycrdt import create_sync_message

        await self.ws.send_bytes(create_sync_message(self.doc))

    async def type(self, rate: float, until: float) -> None:
        from pycrdt import create_update_message

        await asyncio.sleep(random.random() / rate)
        interval, start = 1 / rate, time.perf_counter()
        while time.perf_counter() < until:
            self.typed += 1
            key = f"{self.number}.{self.typed}"
            before = self.doc.get_state()
            self._own = True
            try:
                self.text.insert(0, f"{key}|")
            finally:
                self._own = False
            self.sent_at[key] = time.perf_counter()
            await self.ws.send_bytes(create_update_message(self.doc.get_update(before)))
            delay = start + self.typed * interval - time.perf_counter()
            await asyncio.sleep(max(0.0, delay))


async def run_step(url: str, sessions: int, tabs_per_session: int, rate: float,
                   seconds: float, pid: int, progress: Progress) -> Step:
    """The capacity step's load against the peer's server (process ``pid``)."""
    import aiohttp

    step = Step(sessions, tabs_per_session, rate)
    sent_at: dict[str, float] = {}
    clients = [_YClient(f"cap{s}", s * tabs_per_session + k, sent_at)
               for s in range(sessions) for k in range(tabs_per_session)]
    # no limit on connections (aiohttp allows 100 by default): one a tab
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as http:
        readers: list[asyncio.Task] = []
        try:
            before = None
            for client in clients:
                await client.open(http, url)
                readers.append(asyncio.create_task(client.read()))
                await client.hello()
                await asyncio.wait_for(client.synced.wait(), JOIN_TIMEOUT)
                if before is None:
                    before = ProcessSample.take(pid)
            progress(f"{step.tabs} Yjs clients synced; typing {rate:g} keys/s each for "
                     f"{seconds:g} s")
            joined = ProcessSample.take(pid)
            counted_from = time.perf_counter() + WARM_UP * seconds
            until = time.perf_counter() + seconds
            await asyncio.gather(*(c.type(rate, until) for c in clients))
            step.expected = sum(c.typed for c in clients) * (tabs_per_session - 1)
            step.deliveries = step.expected
            deadline = time.perf_counter() + DRAIN_TIMEOUT
            while (sum(len(c.arrivals) for c in clients) < step.expected
                   and time.perf_counter() < deadline):
                await asyncio.sleep(0.05)
            step.gateway = ProcessSample.take(pid).since(joined, before)
        except TimeoutError:
            step.error = f"a Yjs client was not synced within {JOIN_TIMEOUT:g} s"
            return step
        finally:
            await close_all(readers, [c.ws for c in clients])
    step.expected = sum(1 for at in sent_at.values() if at >= counted_from) * (
        tabs_per_session - 1)
    step.samples = [(at - sent_at[key]) * 1000 for c in clients for key, at in c.arrivals
                    if sent_at.get(key, 0) >= counted_from]
    return step


def peer_steps(plan: list[int], tabs_per_session: int, rate: float, seconds: float,
               stop_at: Callable[[dict[str, Any]], str | None],
               progress: Progress) -> tuple[list[dict[str, Any]], str | None]:
    """The plan's steps against the peer, each with a fresh server, until ``stop_at``
    gives a reason."""
    from groupcomm.tools.procs import LineProcess

    rows: list[dict[str, Any]] = []
    for number, sessions in enumerate(plan, 1):
        progress(f"pycrdt-websocket step {number}/{len(plan)}: {sessions} room(s) × "
                 f"{tabs_per_session} clients")
        server = LineProcess("pycrdt-websocket", [sys.executable, "-m",
                                                  "groupcomm.web.crdt_peer"])
        try:
            line = server.wait_line(lambda x: x.startswith("listening on "),
                                    what="the pycrdt-websocket server")
            step = asyncio.run(run_step(line.split()[2], sessions, tabs_per_session, rate,
                                        seconds, server.process.pid, progress))
        finally:
            server.terminate()
        row = step.row()
        rows.append(row)
        progress(f"  {row['tabs']} clients: p50 {row.get('p50_ms')} ms, p99 "
                 f"{row.get('p99_ms')} ms, server CPU {row.get('gateway_cpu_percent')}%")
        reason = stop_at(row)
        if reason:
            return rows, reason
    return rows, None


def main() -> int:
    args = build_parser().parse_args()
    try:
        asyncio.run(_serve(args.http))
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
