"""The web gateway: one aiohttp application serving the pages, ``/stats`` and a WebSocket
per tab, whose first message logs it in as a :class:`~groupcomm.web.members.TabMember`
(what is refused and counted, reconnection, several tabs of one person: docs/web.md)."""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence, Set
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from importlib import resources
from typing import Any

from aiohttp import WSMsgType, web

from groupcomm.core.causality import CausalityError
from groupcomm.core.node import UnknownPeerError
from groupcomm.transport import collector
from groupcomm.transport.communicator import Communicator, CommunicatorError, JoinError
from groupcomm.transport.host import Host
from groupcomm.web.auth import Users
from groupcomm.web.live import LiveViews
from groupcomm.web.members import (
    PAGES,
    BadEdit,
    TabClosed,
    TabMember,
    payload_for_tab,
    person_of,
    tab_member_name,
)
from groupcomm.web.requests import (
    LIMITS,
    MAX_MESSAGE,
    MAX_TABS,
    BadRequest,
    Request,
    parse_request,
)
from groupcomm.web.session_view import MAX_STEPS, SessionView
from groupcomm.web.tab_names import is_name_taken, names_in_use

log = logging.getLogger(__name__)

#: seconds a new WebSocket has to log in
HELLO_TIMEOUT = 10.0
#: seconds between checks that the users file changed (each login checks too): how soon
#: a removed user's open tabs are closed
USERS_CHECK_EVERY = 2.0
#: aiohttp closes a connection whose message exceeds this (1009); messages between
#: MAX_MESSAGE and this get an error and the connection stays
HARD_LIMIT = 4 * MAX_MESSAGE
PAGE_FILES = {"/": "index.html", "/im": "im.html", "/edit": "edit.html",
              "/session": "session.html"}
STATIC_TYPES = {".js": "text/javascript", ".css": "text/css", ".html": "text/html",
                ".png": "image/png"}
#: the editor page's CodeMirror, bundled from the repository's web/ by ./run (not committed)
BUNDLE = "codemirror.js"
BUNDLE_MISSING = (
    "The editor page needs its CodeMirror bundle (groupcomm/web/static/codemirror.js), which "
    "is not built. In the repository, `./run groupcomm --help` builds it (it installs node "
    "and npm from Debian when missing and it can), or by hand: `cd web && npm ci && npm run "
    "build`; then reload this page.")


def _static(name: str) -> Any:
    """A file of the package's ``static/`` (a Traversable)."""
    return resources.files("groupcomm.web").joinpath("static", name)


def static_file(name: str) -> web.Response:
    """A file of ``static/`` (HTTP 404 for a name that is not one; 503 saying how to
    build it for the editor page without its bundle)."""
    suffix = name[name.rfind("."):] if "." in name else ""
    if "/" in name or name.startswith(".") or suffix not in STATIC_TYPES:
        raise web.HTTPNotFound()
    if name == "edit.html" and not _static(BUNDLE).is_file():
        log.warning("the editor page was asked for without its bundle: %s", BUNDLE_MISSING)
        return web.Response(status=503, text=BUNDLE_MISSING)
    try:
        body = _static(name).read_bytes()
    except (FileNotFoundError, IsADirectoryError):
        if name == BUNDLE:
            return web.Response(status=503, text=BUNDLE_MISSING)
        raise web.HTTPNotFound() from None
    return web.Response(body=body, content_type=STATIC_TYPES[suffix],
                        headers={"Cache-Control": "no-store"})


class Handoff:
    """Events for the tabs, from the poll thread (or the event loop) to the tabs' queues on
    the event loop: one wake-up of the loop for all the events pushed meanwhile, not one
    each (with hundreds of tabs a keystroke is pushed to each of its session's tabs).
    What the shared poll thread pushes waits for the end of its round of turns
    (:meth:`flush`). Each queue gets its events in the order they were pushed."""

    def __init__(self, loop: asyncio.AbstractEventLoop, host: Host | None = None) -> None:
        self.loop = loop
        self.host = host
        self._lock = threading.Lock()
        #: (a tab's queue or a view's feed, the event)
        self._pending: list[tuple[asyncio.Queue | ViewFeed, dict[str, Any]]] = []
        self._scheduled = False
        self._loop_thread = threading.get_ident()  # made on the event loop's thread
        if host is not None:
            host.after_turns(self.flush)

    def push(self, queue: asyncio.Queue | ViewFeed, event: dict[str, Any]) -> None:
        """Thread-safe; RuntimeError once the event loop is closed."""
        with self._lock:
            self._pending.append((queue, event))
            if self._scheduled:
                return
            if threading.get_ident() == self._loop_thread:
                self._scheduled = True
                self.loop.call_soon(self._deliver)
                return
            if self.host is not None and self.host.on_thread():
                return  # flush() wakes the event loop after this round of turns
            self._scheduled = True
        self._wake()

    def flush(self) -> None:
        """Wake the event loop for what was pushed and is not on its way (poll thread)."""
        with self._lock:
            if not self._pending or self._scheduled:
                return
            self._scheduled = True
        self._wake()

    def _wake(self) -> None:
        try:
            self.loop.call_soon_threadsafe(self._deliver)
        except RuntimeError:
            with self._lock:
                self._scheduled = False
            if self.host is None or not self.host.on_thread():
                raise

    def _deliver(self) -> None:
        with self._lock:
            pending, self._pending = self._pending, []
            self._scheduled = False
        for queue, event in pending:
            queue.put_nowait(event)


class ViewFeed:
    """A session view's trace records, taken on the event loop from a :class:`Handoff`
    (as a tab's queue is) and fed to the view in one batch per wake-up: the records of a
    round of turns reach the view with the same wake-up of the loop as the tabs' events."""

    def __init__(self, live: LiveViews, name: str, handoff: Handoff) -> None:
        self.live = live
        self.name = name
        self.handoff = handoff
        self._records: list[dict[str, Any]] = []

    def tap(self, record: dict[str, Any]) -> None:
        """A member's record, from any thread (the members' tracers call it)."""
        try:
            self.handoff.push(self, record)
        except RuntimeError:  # the event loop is closed: the view went with it
            pass

    def put_nowait(self, record: dict[str, Any]) -> None:
        """On the event loop only (what :class:`Handoff` calls)."""
        if not self._records:
            self.handoff.loop.call_soon(self._feed)
        self._records.append(record)

    def _feed(self) -> None:
        records, self._records = self._records, []
        self.live.feed(self.name, records)


class Gateway:

    def __init__(self, users: Users, session: str | Sequence[str], *,
                 communicator_kwargs: dict[str, Any],
                 inject_delays: Callable[[Communicator], None] | None = None,
                 presence_hold: float = 0.1, edit_refusal: str | None = None,
                 module: str = "none", allowed_origins: tuple[str, ...] = (),
                 share_thread: bool = True) -> None:
        self.users = users
        #: the sessions this gateway's tabs can join (a tab names one in the WebSocket's
        #: ``?session=``; without it, the first)
        self.sessions = (session,) if isinstance(session, str) else tuple(session)
        if not self.sessions:
            raise ValueError("a gateway needs at least one session")
        self.session = self.sessions[0]
        self.communicator_kwargs = communicator_kwargs
        self.inject_delays = inject_delays
        self.presence_hold = presence_hold
        self.edit_refusal = edit_refusal  # why the editor cannot run here (None: it can)
        self.module = module
        self.allowed_origins = allowed_origins
        self.counters: Counter[str] = Counter()
        #: drives every tab's member on one thread (None: each member its own)
        self.host = Host(name="web-gateway") if share_thread else None
        #: (session, page, tab member name: ann, ann:2) -> its tab's member
        self.tabs: dict[tuple[str, str, str], TabMember] = {}
        #: the same for tabs whose member is joining (their names are taken)
        self._joining: set[tuple[str, str, str]] = set()
        #: the events waiting to be sent to each tab (``/stats``: a tab that falls behind)
        self._queues: dict[tuple[str, str, str], asyncio.Queue] = {}
        self.app = web.Application()
        #: the live session view (/session): one view per page's application (and per
        #: session, with several: a view is one session's members), fed by the tab
        #: members' trace records
        self.live = LiveViews((), authorize=self._authorize,
                              title=f"session {', '.join(self.sessions)} (gateway)")
        names = [self.view_name(s, page) for s in self.sessions for page in PAGES]
        # the steps kept are shared out among the sessions' views: the gateway's memory
        # for them is what one session's took
        kept = max(100, MAX_STEPS * len(PAGES) // len(names))
        self.live.views.update({name: SessionView(name, kept) for name in names})
        self.live.add_routes(self.app)
        self.app.router.add_get("/ws/{kind}", self.websocket)
        self.app.router.add_get("/static/{name}", self.static)
        self.app.router.add_get("/stats", self.stats)
        for path in PAGE_FILES:
            self.app.router.add_get(path, self.static)
        self.app.on_startup.append(self._start_users_check)
        self.app.on_shutdown.append(self._shutdown)
        self._users_check: asyncio.Task | None = None
        #: the login checks' thread: scrypt takes 16 MiB a check, which each thread's
        #: malloc arena keeps once freed (a pool of threads would keep it per thread, a
        #: burst of logins at once); logins are checked one at a time
        self._checks = ThreadPoolExecutor(1, thread_name_prefix="login-check")
        #: what the poll thread pushes to the tabs' queues (made on the event loop)
        self._handoff: Handoff | None = None
        #: each session view's feed through the handoff
        self._feeds: dict[str, ViewFeed] = {}

    def view_name(self, session: str, kind: str) -> str:
        """The session view of ``session``'s ``kind`` page: ``edit``; with several
        sessions ``session/edit``."""
        return kind if len(self.sessions) == 1 else f"{session}/{kind}"

    async def static(self, request: web.Request) -> web.Response:
        """A page or a file of ``static/``."""
        return static_file(PAGE_FILES.get(request.path) or request.match_info["name"])

    async def _authorize(self, user: str, token: str) -> bool:
        """A session view page is let in with a user's login token."""
        await self._refresh_users()
        return await asyncio.get_running_loop().run_in_executor(
            None, self.users.verify, user, token)

    async def stats(self, request: web.Request) -> web.Response:
        """Counters and the tabs' member ids, for this machine only (who is logged in is
        not for anyone who can reach the port)."""
        if request.remote not in ("127.0.0.1", "::1"):
            raise web.HTTPForbidden(text="/stats answers requests from this machine only")
        body = {"counters": dict(self.counters), "module": self.module,
                "session_view": dict(self.live.counters),
                "shared_thread": self.host is not None,
                "shared": self.host.sharing if self.host is not None else {},
                "collector": collector.report(),
                "snapshots_waiting": sum(m.snapshot_waits for m in self.tabs.values()),
                "queued_max": max((q.qsize() for q in self._queues.values()), default=0),
                # own messages not yet at every receiver, and those forgotten past the cap
                "receipts": {"waiting": sum(len(m.receipts) for m in self.tabs.values()),
                             "forgotten": sum(m.receipts.forgotten for m in self.tabs.values())},
                "tabs": sorted(self._tab_label(key, member) for key, member in self.tabs.items())}
        return web.json_response(body)

    def _tab_label(self, key: tuple[str, str, str], member: TabMember) -> str:
        """``page/member id``; with several sessions ``session/page/member id`` (one
        person's member ids in two sessions can be the same)."""
        session, page, _ = key
        label = f"{page}/{member.member_id}"
        return label if len(self.sessions) == 1 else f"{session}/{label}"

    async def websocket(self, request: web.Request) -> web.StreamResponse:
        kind = request.match_info["kind"]
        if kind not in PAGES:
            raise web.HTTPNotFound()
        session = request.query.get("session", self.session)
        if session not in self.sessions:
            self.counters["unknown_session"] += 1
            raise web.HTTPNotFound(text=f"this gateway serves no session {session!r}")
        origin = request.headers.get("Origin")  # none: not a browser, still logs in
        if origin not in (None, f"{request.scheme}://{request.host}", *self.allowed_origins):
            self.counters["refused_origin"] += 1
            log.warning("refused a WebSocket from origin %s", origin)
            raise web.HTTPForbidden(text="cross-origin WebSocket requests are refused")
        ws = web.WebSocketResponse(max_msg_size=HARD_LIMIT, heartbeat=20.0)
        await ws.prepare(request)
        queue: asyncio.Queue = asyncio.Queue()
        member = None
        try:
            member = await self._login(ws, session, kind, queue)
            if member is not None:
                await self._serve(ws, kind, member, queue)
        finally:
            if member is not None:
                await self._leave(session, kind, member)
            if not ws.closed:
                await ws.close()
        return ws

    async def _error(self, ws: web.WebSocketResponse, reason: str, counter: str,
                     ref: Any = None) -> None:
        self.counters[counter] += 1
        log.info("tab request refused (%s): %s", counter, reason)
        if not ws.closed:
            await ws.send_json({"type": "error", "error": reason, "ref": ref})

    async def _login(self, ws: web.WebSocketResponse, session: str, kind: str,
                     queue: asyncio.Queue) -> TabMember | None:
        loop = asyncio.get_running_loop()
        try:
            message = await ws.receive(timeout=HELLO_TIMEOUT)
        except TimeoutError:
            await self._error(ws, f"no login within {HELLO_TIMEOUT:g} s", "login_timeout")
            return None
        if message.type != WSMsgType.TEXT:
            return None
        try:
            hello = parse_request(kind, message.data)
            if hello.type != "hello":
                raise BadRequest("the first message must be a hello with user and token")
        except BadRequest as error:
            await self._error(ws, str(error), "malformed")
            return None
        user, token = hello.fields["user"], hello.fields["token"]
        await self._refresh_users()  # a user added or removed a moment ago counts
        if not await loop.run_in_executor(self._checks, self.users.verify, user, token):
            await self._error(ws, "wrong user name or token (ask for a new login link)",
                              "login_failed")
            return None
        if kind == "edit" and self.edit_refusal:
            await self._error(ws, f"the editor cannot run here: {self.edit_refusal}",
                              "edit_refused")
            return None
        slot = self._free_slot(session, kind, user, hello.fields["tab"])
        if slot is None:
            await self._error(ws, f"{user} already has {MAX_TABS} tabs on the {kind} page "
                              "(close one)", "too_many_tabs")
            return None
        if self._handoff is None:
            self._handoff = Handoff(loop, self.host)
        view = self.view_name(session, kind)
        feed = self._feeds.get(view)
        if feed is None:
            feed = self._feeds[view] = ViewFeed(self.live, view, self._handoff)
        try:
            slot, member = await self._join_tab(session, kind, user, slot,
                                                partial(self._handoff.push, queue), feed.tap)
        except (CommunicatorError, OSError, ValueError) as error:
            await self._error(ws, f"cannot join the session: {error}", "join_failed")
            return None
        name = member.name
        self.tabs[(session, kind, name)] = member
        self._queues[(session, kind, name)] = queue
        self.counters["logins"] += 1
        await ws.send_json({**member.welcome(), "module": self.module, "limits": LIMITS,
                            "tab": slot, "session": session})
        return member

    async def _join_tab(self, session: str, kind: str, user: str, slot: int,
                        push: Callable[[dict[str, Any]], None],
                        tap: Callable[[dict[str, Any]], None]) -> tuple[int, TabMember]:
        """The tab's member, joined under tab number ``slot``'s name (a second tab is a
        member of its own, ``ann:2``, never a replacement of the first) or, while the
        session says that name is held (a tab on another gateway of the session has it:
        docs/deploy.md), the next free number's."""
        loop = asyncio.get_running_loop()
        tried: set[int] = set()
        while True:
            name = tab_member_name(user, slot)
            self._joining.add((session, kind, name))
            try:
                return slot, await loop.run_in_executor(None, lambda name=name: TabMember(
                    kind, user, session, push,
                    communicator_kwargs=self.communicator_kwargs,
                    presence_hold=self.presence_hold, inject_delays=self.inject_delays,
                    host=self.host, name=name, tap=tap))
            except JoinError as error:
                if not is_name_taken(error):
                    raise
                self.counters["tab_name_taken"] += 1
                tried.add(slot)
                following = self._free_slot(session, kind, user, None, tried)
                if following is None:
                    raise
                slot = following
            finally:
                self._joining.discard((session, kind, name))

    def _free_slot(self, session: str, kind: str, user: str,
                   wanted: int | None, tried: Set[int] = frozenset()) -> int | None:
        """The tab number a login of ``user`` gets: the one the tab asks for (it had
        it before a reload or a reconnect) if no open tab has it, else the lowest free
        one; None when all are taken. A login never takes an open tab's place: two tabs
        asking for one number (a duplicated tab) get two, and a name this gateway's
        members see in the session (a tab on another gateway) is skipped, as are the
        numbers in ``tried``."""
        # one member's view of the session is enough (they all see the same members),
        # and costs a login one list, not one per open tab
        viewer = next((m for (s, k, _), m in self.tabs.items() if (s, k) == (session, kind)),
                      None)
        in_use = names_in_use([viewer.communicator.members]) if viewer is not None else set()

        def free(slot: int) -> bool:
            key = (session, kind, tab_member_name(user, slot))
            return (key not in self.tabs and key not in self._joining
                    and key[2] not in in_use and slot not in tried)

        if wanted is not None and free(wanted):
            return wanted
        return next((slot for slot in range(1, MAX_TABS + 1) if free(slot)), None)

    async def _refresh_users(self) -> None:
        """Read the users file again if it changed; close the tabs of users no longer
        in it (docs/web.md, "Security")."""
        loop = asyncio.get_running_loop()
        outcome = await loop.run_in_executor(None, self.users.refresh)
        if outcome is None:
            return
        self.counters[f"users_{outcome}"] += 1
        if outcome != "reloaded":
            return
        known = set(self.users.names)
        for key, member in list(self.tabs.items()):
            if member.user in known:
                continue
            del self.tabs[key]
            self._queues.pop(key, None)
            self.counters["tabs_of_removed_users"] += 1
            log.warning("closing %s's %s tab: no longer in the users file", member.user, key[1])
            member.push({"type": "fatal", "error": f"{member.user} was removed from this "
                         "gateway's users"})
            await loop.run_in_executor(None, member.close)

    async def _start_users_check(self, app: web.Application) -> None:
        self._users_check = asyncio.create_task(self._check_users())

    async def _check_users(self) -> None:
        while True:
            await asyncio.sleep(USERS_CHECK_EVERY)
            try:
                await self._refresh_users()
            except Exception:  # noqa: BLE001 - the check must outlive one bad round
                log.exception("checking the users file failed")

    async def _serve(self, ws: web.WebSocketResponse, kind: str, member: TabMember,
                     queue: asyncio.Queue) -> None:
        pump = asyncio.create_task(self._pump(ws, queue))
        try:
            async for message in ws:
                if message.type == WSMsgType.ERROR:
                    break
                if message.type != WSMsgType.TEXT:
                    await self._error(ws, "send JSON text messages, not binary", "malformed")
                    continue
                try:
                    request = parse_request(kind, message.data)
                except BadRequest as error:
                    counter = "oversized" if "bytes; at most" in str(error) else "malformed"
                    await self._error(ws, str(error), counter, ref=error.ref)
                    continue
                await self._act(ws, member, request)
                if pump.done():
                    break
        finally:
            pump.cancel()
        if ws.close_code == 1009:
            self.counters["oversized"] += 1

    async def _pump(self, ws: web.WebSocketResponse, queue: asyncio.Queue) -> None:
        while True:
            event = await queue.get()
            batch = [event]
            while not queue.empty() and len(batch) < 256:
                batch.append(queue.get_nowait())
            try:
                await ws.send_str(json.dumps(batch if len(batch) > 1 else event))
            except ConnectionResetError:
                return
            if any(e.get("type") == "fatal" for e in batch):
                await ws.close()
                return

    async def _act(self, ws: web.WebSocketResponse, member: TabMember, request: Request) -> None:
        loop = asyncio.get_running_loop()
        fields = request.fields
        try:
            if request.type == "applied":
                member.applied(request.applied)
            elif request.type == "say":
                to = fields["to"]
                # to a person: each of their tabs (a member name reaches that one only)
                tabs = [m for m in member.communicator.members
                        if person_of(m) == to and m != member.member_id]
                first, payload = member.say(
                    request.applied, (tabs or [to]) if to else None, fields["text"],
                    private=bool(to), line=fields["line"], said=fields["said"] or time.time())
                await ws.send_json({"type": "sent", "id": first.app_message_id,
                                    "local": fields["local"],
                                    **payload_for_tab("im", payload, first.sender,
                                                      first.app_message_id),
                                    "vc": dict(first.vc), "text": fields["text"],
                                    "to": to or None, "destinations": list(first.destinations),
                                    "transmitted": member.transmitted(first.app_message_id)})
            elif request.type == "edit":
                # checked against the mirror first: a bad edit reaches no one else
                member.edit(request.applied, fields["op"], fields["local"])  # answers `sent`
            elif request.type == "resync":
                member.resync()
            elif request.type == "cursor":
                member.move_cursor(request.applied, fields["anchor"], fields["other"],
                                   fields["selection"])
            elif request.type == "held":
                await ws.send_json({"type": "held",
                                    "held": await loop.run_in_executor(None, member.held)})
            elif request.type == "release":
                name, comm = fields["member"], member.communicator
                text = f"{name} is still here; /release is for members who left"
                if name not in comm.members:
                    released = await loop.run_in_executor(None, comm.release_waiting_on, name)
                    text = f"released {len(released)} message(s) that waited on {name}"
                await ws.send_json({"type": "notice", "text": text})
            elif request.type == "hello":
                raise BadRequest("already logged in")
        except BadRequest as error:
            await self._error(ws, str(error), "malformed")
        except BadEdit as error:
            await self._error(ws, f"edit refused, nothing sent: {error}", "bad_edit",
                              ref=fields.get("local"))
        except (ValueError, UnknownPeerError, CausalityError, CommunicatorError,
                TabClosed) as error:
            await self._error(ws, str(error), "refused", ref=fields.get("local"))

    async def _leave(self, session: str, kind: str, member: TabMember) -> None:
        if self.tabs.get((session, kind, member.name)) is member:
            del self.tabs[(session, kind, member.name)]
            del self._queues[(session, kind, member.name)]
        await asyncio.get_running_loop().run_in_executor(None, member.close)

    async def _shutdown(self, app: web.Application) -> None:
        if self._users_check is not None:
            self._users_check.cancel()
        members = list(self.tabs.values())
        self.tabs.clear()
        loop = asyncio.get_running_loop()
        await asyncio.gather(*(loop.run_in_executor(None, m.close) for m in members))
        if self.host is not None:
            await loop.run_in_executor(None, self.host.close)
        self._checks.shutdown(wait=False)
