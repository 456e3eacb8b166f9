"""The live session view's serving side, shared by the gateway (``/session``, fed by its
members' trace records as they are emitted) and ``groupcomm watch`` (fed by trace files
as they grow): one :class:`~groupcomm.web.session_view.SessionView` per view, and a
WebSocket per open page that gets the view's steps so far, then each new one as it is
made (docs/web.md, "The live session view")."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import threading
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from aiohttp import WSMsgType, web

from groupcomm.core.tracing import TRACE_DIR_ENV, JsonlTracer, Tracer
from groupcomm.web.session_view import VIEW_EVENTS, SessionView

log = logging.getLogger(__name__)

#: steps sent in one WebSocket message at most (a page that opens on a long run gets
#: the kept steps in a few messages)
BATCH = 500
#: a page's hello is awaited this long
HELLO_TIMEOUT = 10.0
#: a page that does not read its steps (a stalled tab) is closed when this many wait
MAX_QUEUED = 10_000

#: checks a page's ``user`` and ``token`` (the gateway); None lets every page in
Authorize = Callable[[str, str], Awaitable[bool]]


class TapTracer(Tracer):
    """A member's tracer that hands the records the view reads to ``sink`` (on the
    member's thread) and, with ``trace_dir``, also writes every record to the member id's
    trace file as :class:`~groupcomm.core.tracing.JsonlTracer` does."""

    enabled = True

    def __init__(self, sink: Callable[[dict[str, Any]], None],
                 trace_dir: str | os.PathLike[str] | None = None) -> None:
        self._sink = sink
        self._dir = trace_dir
        self._files: dict[str, JsonlTracer] = {}
        self._lock = threading.Lock()

    def emit(self, record: dict[str, Any]) -> None:
        if record.get("event") in VIEW_EVENTS:
            self._sink(record)
        if self._dir is not None:
            process = str(record.get("process"))
            with self._lock:
                writer = self._files.get(process)
                if writer is None:  # one file per member id, as without the tap
                    writer = self._files[process] = JsonlTracer(self._dir, process)
            writer.emit(record)

    def flush(self) -> None:
        with self._lock:
            writers = list(self._files.values())
        for writer in writers:
            writer.flush()

    def close(self) -> None:
        with self._lock:
            writers = list(self._files.values())
            self._files.clear()
        for writer in writers:
            writer.close()


def tap_tracer(sink: Callable[[dict[str, Any]], None],
               trace_dir: str | os.PathLike[str] | None) -> TapTracer:
    """The tracer of a gateway member: ``trace_dir`` as given, else
    ``$GROUPCOMM_TRACE_DIR`` as every communicator honours it, else the tap alone."""
    directory = trace_dir if trace_dir is not None else os.environ.get(TRACE_DIR_ENV) or None
    return TapTracer(sink, directory)


class LiveViews:
    """The views of one gateway or watcher, and the pages that look at them. Every
    method but :meth:`sink`'s function runs on the event loop."""

    def __init__(self, views: Iterable[str] = (), authorize: Authorize | None = None,
                 title: str = "") -> None:
        self.views: dict[str, SessionView] = {name: SessionView(name) for name in views}
        self.authorize = authorize
        self.title = title
        self.counters: Counter[str] = Counter()
        self._pages: dict[str, set[asyncio.Queue]] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pending: list[tuple[str, dict[str, Any]]] = []
        self._pending_lock = threading.Lock()

    def view(self, name: str) -> SessionView:
        view = self.views.get(name)
        if view is None:
            view = self.views[name] = SessionView(name)
        return view

    def feed(self, name: str, records: Iterable[dict[str, Any]]) -> None:
        """Add ``records`` to view ``name`` and send the steps they make to its pages."""
        new = len(self.views)
        view = self.view(name)
        steps: list[dict[str, Any]] = []
        for record in records:
            try:
                steps.extend(view.add(record))
            except (KeyError, TypeError, ValueError) as error:
                # a record the schema passes but the view cannot read: said, not fatal
                self.counters["unreadable_records"] += 1
                log.warning("view %s: record left out (%s): %.200r", name, error, record)
        if len(self.views) != new:
            self._broadcast_all({"type": "views", "views": sorted(self.views)})
        if steps:
            for start in range(0, len(steps), BATCH):
                self._broadcast(name, {"type": "steps", "view": name,
                                       "steps": steps[start:start + BATCH]})

    def _broadcast(self, name: str, message: dict[str, Any]) -> None:
        for queue in list(self._pages.get(name, ())):
            if queue.qsize() >= MAX_QUEUED:
                self.counters["pages_too_slow"] += 1
                queue.put_nowait(None)  # the page's handler closes it
                self._pages[name].discard(queue)
                continue
            queue.put_nowait(message)

    def _broadcast_all(self, message: dict[str, Any]) -> None:
        for name in list(self._pages):
            self._broadcast(name, message)

    # -- records from other threads (the gateway's members) -----------------------------
    def sink(self, name: str) -> Callable[[dict[str, Any]], None]:
        """A function any thread may call with a record of view ``name``: the records
        are fed on the event loop in the order given (call :meth:`start` first)."""
        def put(record: dict[str, Any]) -> None:
            with self._pending_lock:
                first = not self._pending
                self._pending.append((name, record))
            loop = self._loop
            if first and loop is not None and not loop.is_closed():
                loop.call_soon_threadsafe(self._drain)
        return put

    def _drain(self) -> None:
        with self._pending_lock:
            pending, self._pending = self._pending, []
        by_view: dict[str, list[dict[str, Any]]] = {}
        order: list[str] = []
        for name, record in pending:
            if name not in by_view:
                order.append(name)
            by_view.setdefault(name, []).append(record)
        for name in order:
            self.feed(name, by_view[name])

    async def start(self, app: web.Application | None = None) -> None:
        """Take the running loop (an aiohttp ``on_startup`` hook)."""
        self._loop = asyncio.get_running_loop()
        self._drain()

    # -- the page -------------------------------------------------------------------------
    def add_routes(self, app: web.Application) -> None:
        """The page's WebSocket, ``/session/ws`` (the caller serves ``/session``)."""
        app.router.add_get("/session/ws", self.websocket)
        app.on_startup.append(self.start)

    async def websocket(self, request: web.Request) -> web.StreamResponse:
        origin = request.headers.get("Origin")
        if origin not in (None, f"{request.scheme}://{request.host}"):
            self.counters["refused_origin"] += 1
            raise web.HTTPForbidden(text="cross-origin WebSocket requests are refused")
        ws = web.WebSocketResponse(heartbeat=20.0, max_msg_size=64 * 1024)
        await ws.prepare(request)
        name = await self._hello(ws)
        if name is None:
            await ws.close()
            return ws
        queue: asyncio.Queue = asyncio.Queue()
        self._pages.setdefault(name, set()).add(queue)
        self.counters["pages"] += 1
        reader = asyncio.create_task(self._read_until_closed(ws))
        try:
            snapshot = self.view(name).snapshot()
            steps = snapshot.pop("steps")
            await ws.send_json({"type": "snapshot", "views": sorted(self.views),
                                "title": self.title, **snapshot,
                                "steps": steps[:BATCH], "more": len(steps) > BATCH})
            for start in range(BATCH, len(steps), BATCH):
                await ws.send_json({"type": "steps", "view": name,
                                    "steps": steps[start:start + BATCH]})
            while not reader.done():
                getter = asyncio.ensure_future(queue.get())
                done, _ = await asyncio.wait({getter, reader},
                                             return_when=asyncio.FIRST_COMPLETED)
                if getter not in done:
                    getter.cancel()
                    break
                message = getter.result()
                if message is None:
                    break
                await ws.send_json(message)
        except ConnectionResetError:
            pass
        finally:
            reader.cancel()
            self._pages.get(name, set()).discard(queue)
            if not ws.closed:
                await ws.close()
        return ws

    async def _hello(self, ws: web.WebSocketResponse) -> str | None:
        """The view a page asks for in its first message, once it is let in."""
        try:
            message = await ws.receive(timeout=HELLO_TIMEOUT)
        except TimeoutError:
            return None
        try:
            hello = json.loads(message.data) if message.type == WSMsgType.TEXT else None
        except ValueError:
            hello = None
        if not isinstance(hello, dict) or hello.get("type") != "hello":
            self.counters["malformed"] += 1
            await ws.send_json({"type": "error", "error": "the first message must be a "
                                "hello naming the view"})
            return None
        if self.authorize is not None:
            user, token = hello.get("user"), hello.get("token")
            if not (isinstance(user, str) and isinstance(token, str)
                    and await self.authorize(user, token)):
                self.counters["login_failed"] += 1
                await ws.send_json({"type": "error", "error": "wrong user name or token "
                                    "(open the session view's login link)"})
                return None
        name = hello.get("view")
        if not isinstance(name, str) or not name:
            # the busiest view (a gateway's chat rather than its idle editor); the
            # first made (the chat) when none has steps yet
            name = max(self.views, key=lambda v: self.views[v].next_index, default=".")
        if name not in self.views:
            await ws.send_json({"type": "error", "error": f"no view {name!r}; views: "
                                f"{', '.join(sorted(self.views)) or 'none yet'}"})
            return None
        return name

    @staticmethod
    async def _read_until_closed(ws: web.WebSocketResponse) -> None:
        async for message in ws:
            if message.type in (WSMsgType.ERROR, WSMsgType.CLOSE):
                break
