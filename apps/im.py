"""``groupcomm im``: a terminal instant messenger for one participant (docs/commands.md).

Each line shows its identity, the same for every viewer (``ann·3``: the sender's own count
of its lines, :mod:`groupcomm.apps.im_lines`), the time it was said (the sender's clock, in
this viewer's local time) and the person who said it (``ann``, not the member id ``ann~2``).
A message concurrent with one already shown is marked ``(concurrent with bob·2)``; messages
shown before its sender joined are not compared (the newcomer could not have seen them).
What happens in the session is said in chat words from the communicator's typed events
(:meth:`ChatScreen.on_event`), never read from the log."""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sys
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TextIO

from groupcomm.apps.im_commands import ChatApp, ScreenLogHandler
from groupcomm.apps.im_held import HeldWatch, causes
from groupcomm.apps.im_input import is_terminal, read_piped, read_terminal, terminal_output
from groupcomm.apps.im_lines import (
    ChatLine,
    Entry,
    clock,
    count_of,
    entry,
    entry_identity,
    identity,
    person,
    said_of,
)
from groupcomm.apps.im_output import ChatOutput
from groupcomm.apps.im_resend import REMEMBERED, OwnMessages
from groupcomm.apps.session_options import (
    SessionOptions,
    add_session_arguments,
    session_options,
)
from groupcomm.cli.args import ArgumentParser, CliError, run_main, setup_logging
from groupcomm.core.member_ids import display_name
from groupcomm.core.messages import ReceivedMessage, SentMessage, Tag
from groupcomm.core.session_messages import Snapshot
from groupcomm.protocol.session_events import (
    MessagesLost,
    Rejoined,
    ServerAnswers,
    ServerSilent,
    SessionEvent,
)
from groupcomm.transport.communicator import Communicator, CommunicatorError
from groupcomm.transport.config import Connection, Listeners, StateTransfer

#: messages to everyone a newcomer is shown when it joins
HISTORY = 200
#: seconds after the server answers again within which a rejoin says it instead
ANSWERS_AGAIN_AFTER = 1.0
#: the smallest --max-frame taken
MIN_MAX_FRAME = 4096
#: an own message the module still holds this long after it was typed is shown as
#: pending (under mfss it waits for the previous message's ACK)
PENDING_AFTER = 0.5


def _later(delay: float, function: Callable[..., None], *args: object) -> None:
    timer = threading.Timer(delay, function, args)
    timer.daemon = True
    timer.start()


@dataclass(frozen=True)
class Private:
    """The payload of ``/to``: shown as meant for its receiver alone, never handed on to
    a newcomer. ``said`` and ``n`` as in :class:`~groupcomm.apps.im_lines.ChatLine` (an
    older peer's has neither: the class defaults stand in)."""

    text: str
    said: float = 0.0
    n: int = 0
    seen: tuple[tuple[str, int], ...] = ()


def _text_of(payload: object) -> str:
    return payload.text if isinstance(payload, (Private, ChatLine)) else str(payload)


class ChatScreen(ChatOutput):
    """Shows what happens in the session; thread-safe (callbacks run on the I/O thread)."""

    def __init__(self, me: str, out: TextIO) -> None:
        super().__init__(out)
        self.me = me
        # reentrant: a send and its line are recorded under it, and showing takes it too
        self._lock = threading.RLock()
        #: (who, text, application-level id, said at, count) of the latest messages to
        #: everyone (:data:`~groupcomm.apps.im_lines.Entry`)
        self.history: deque[Entry] = deque(maxlen=HISTORY)
        #: (identity, sender, tag) of each message shown live, to mark concurrent ones
        self.shown: list[tuple[str, str, Tag]] = []
        #: this person's own count of its lines (the ``n`` of ``ann·n``)
        self.said = 0
        #: person -> the count of their latest line to everyone shown here (what an own
        #: line says it has seen)
        self.latest: dict[str, int] = {}
        #: held lines shown as waiting: application id -> what they wait for
        self.waiting_lines: dict[str, list[str]] = {}
        #: member -> how many messages were shown when its join was seen here
        self._joined_at: dict[str, int] = {}
        self.communicator: Communicator | None = None
        #: own messages the module has not sent: application id -> [identity, ids of
        #: the copies still held, shown as pending]
        self.unsent: dict[str, list] = {}
        #: copies that left before their line was shown (the I/O thread can be first)
        self._gone: deque[str] = deque(maxlen=1024)
        #: member ids known to be in the session (a rejoin after a restart is not news)
        self._known: set[str] = set()
        #: application ids of the messages shown (a bounded ordered set)
        self._shown_ids: OrderedDict[str, None] = OrderedDict()
        #: this person's messages, to say which were lost and send again those that
        #: reached no one
        self.own = OwnMessages(self, _text_of)
        self._installs = 0
        #: set when this client rejoined (after the server answered again)
        self._rejoined = True
        #: the session server last joined (with --servers, a rejoin may be at another)
        self.server_at = ""
        #: identities of lines typed while the server did not answer, said sent once it does
        self.waiting: list[str] = []
        self._silent = False
        #: the member id this client came back as after being taken for gone
        self._back_as: str | None = None

    def message(self, message: ReceivedMessage) -> None:
        """Show a delivered message, marking the shown ones it was concurrent with (a copy
        of a send split into unicasts counts as the send)."""
        payload = message.user_message
        if isinstance(payload, Private):
            if not message.receiver:
                # replayed by the session server's store (docs/storage.md): a note sent
                # to someone else while the session had two members, not to this person
                return
            if self._shown_before(message.sender, payload):
                return
            self._show(message.sender, f"{person(message.sender)} -> you", message.app_tag,
                       payload.text, identity(message.sender, payload,
                                              message.app_message_id), said_of(payload),
                       self._released(message.app_message_id))
            return
        text = _text_of(payload) if isinstance(payload, ChatLine) else (
            payload if isinstance(payload, str) else repr(payload))
        with self._lock:
            if self._shown_before(message.sender, payload):
                return
            self.history.append((message.sender, text, message.app_message_id,
                                 said_of(payload), count_of(payload)))
            self.remember_shown(message.app_message_id)
            self._note_latest(message.sender, count_of(payload))
            self._show(message.sender, person(message.sender), message.app_tag, text,
                       identity(message.sender, payload, message.app_message_id),
                       said_of(payload), self._released(message.app_message_id))

    def _note_latest(self, sender: str, n: int) -> None:
        if n:
            self.latest[person(sender)] = max(self.latest.get(person(sender), 0), n)

    def _released(self, app_id: str) -> str:
        """The mark of a line shown waiting before, now delivered ('' if it was not)."""
        with self._lock:
            waited = self.waiting_lines.pop(app_id, None)
        return f"was waiting for {', '.join(waited)}; released" if waited else ""

    def on_held(self, message: object, waits_on: list[str]) -> None:
        """The module holds a received line (:class:`~groupcomm.apps.im_held.HeldWatch`):
        shown as waiting, with what it waits for; marked released once delivered."""
        payload = getattr(message, "user_message", None)
        sender = str(getattr(message, "sender", ""))
        app_id = str(getattr(message, "app_message_id", ""))
        with self._lock:
            if app_id in self._shown_ids:
                return
            on = causes(payload, lambda ident: ident in self._shown_ids, waits_on)
            self.waiting_lines[app_id] = on
        who = f"{person(sender)} -> you" if isinstance(payload, Private) else person(sender)
        self.line(f"{identity(sender, payload, app_id)} {clock(said_of(payload))} "
                  f"[{who}, held] {_text_of(payload)}  (waiting for {', '.join(on)})")

    def _shown_before(self, sender: str, payload: object) -> bool:
        """A browser tab's line carries the tab's lasting id: the tab sends it again when
        its gateway died before saying it arrived (docs/web.md); shown once. Else noted
        as shown."""
        line_id = getattr(payload, "line", "")
        if not line_id:
            return False
        key = f"{person(sender)}/{line_id}"
        with self._lock:
            if key in self._shown_ids:
                return True
            self.remember_shown(key)
        return False

    def send(self, send: Callable[[object], list[SentMessage]], text: str,
             to_everyone: bool = False) -> None:
        """Send ``text`` (``send`` sends the payload made of it: a :class:`ChatLine` to
        everyone, else a :class:`Private`, counted and timed) and show it in one step
        under the screen's lock, so that the I/O thread can neither deliver a note to
        oneself before its line nor take a snapshot that has one without the other. Room
        in the communicator's queue is waited for before the lock (a send waiting under
        it would wait for the I/O thread, which waits for the lock to deliver)."""
        if self.communicator is not None:
            self.communicator.wait_for_room(len(self.communicator.members))
        with self._lock:
            n, said = self.said + 1, time.time()
            seen = tuple(sorted((p, k) for p, k in self.latest.items() if p != self.me))
            payload = (ChatLine(text, said, n, seen=seen) if to_everyone
                       else Private(text, said, n, seen))
            messages = send(payload)
            self.said = n
            self.sent(messages, to_everyone)

    def sent(self, messages: list[SentMessage], to_everyone: bool = False) -> None:
        """Show what this person sent, numbered; a send split into unicasts is shown once."""
        message = messages[0]
        me = (self.me, self.me_id())
        others = [d for m in messages for d in m.destinations if d not in me]
        payload = message.user_message
        text = _text_of(payload)
        with self._lock:
            if to_everyone:
                self.history.append((message.sender, text, message.app_message_id,
                                     said_of(payload), count_of(payload)))
                self._note_latest(message.sender, count_of(payload))
            self.remember_shown(message.app_message_id)
            number = identity(self.me, payload, message.app_message_id)
            self._show(self.me, f"you -> {', '.join(map(person, others)) or 'yourself'}",
                       Tag(message.vc), text, number, said_of(payload))
            names = tuple(display_name(d) for m in messages for d in m.destinations
                          if d not in me)
            self.own.record(messages, text, number, names, to_everyone, me)
            if self._silent:
                self.waiting.append(number)
                self.line(f"* {number} waits: the session server does not answer (it goes "
                          "once it does)")
            copies = {m.message_id for m in messages} - set(self._gone)
            if copies:
                self.unsent[message.app_message_id] = [number, copies, False]
                _later(PENDING_AFTER, self._still_pending, message.app_message_id)

    def on_sent(self, message: SentMessage) -> None:
        """The communicator's sent listener: a copy of an own message left (I/O thread)."""
        with self._lock:
            entry = self.unsent.get(message.app_message_id)
            if entry is None:
                if message.message_id not in self.own.copies:
                    self._gone.append(message.message_id)
                return
            entry[1].discard(message.message_id)
            if entry[1]:
                return
            del self.unsent[message.app_message_id]
            if entry[2]:
                self.line(f"* {entry[0]} sent")

    def _still_pending(self, app_id: str) -> None:
        with self._lock:
            entry = self.unsent.get(app_id)
            if entry is None or entry[2]:
                return
            entry[2] = True
            self.line(f"* {entry[0]} pending: the causality module has not sent it yet "
                      "(it waits for an earlier message's acknowledgement)")

    # state transfer (see groupcomm.protocol.state_transfer)
    def snapshot(self) -> Snapshot:
        """The conversation so far, for a newcomer, naming this person's own messages in it."""
        with self._lock:
            own = tuple(item[2] for item in self.history if item[0] == self.me_id())
            return Snapshot(list(self.history), reflects=own)

    def me_id(self) -> str:
        comm = self.communicator
        return comm.member_id if comm is not None else self.me

    def install(self, state: list[object]) -> None:
        """Show the conversation so far (this person is the newcomer), line by line as
        live lines show; handed over again (back after the session took it for gone, or
        a restarted server), only the lines not shown yet (by id), in their order."""
        try:
            history = [entry(raw) for raw in state]
        except (TypeError, ValueError) as error:
            self.line(f"! the conversation received is unusable ({error}); starting without")
            history = []
        with self._lock:
            self._installs += 1
            first = self._installs == 1
            # by message id only: two tabs of one person saying a line at once give
            # both the same identity, and neither may hide the other
            new = [item for item in history if item[2] not in self._shown_ids]
            self.history.extend(new)
            for item in new:
                self.remember_shown(item[2])
                self.remember_shown(entry_identity(item))
                who, text, _, said, n = item
                if person(who) == self.me:  # an earlier run's lines: counting goes on
                    self.said = max(self.said, n)
                self._note_latest(who, n)
                self.line(f"{entry_identity(item)} {clock(said)} [{person(who)}] {text}")
            if first:
                self.line(f"* up to date ({len(new)} earlier message(s))")
            elif new:
                self.line(f"* {len(new)} missed message(s) added")
            if not first and self._back_as is not None:
                self._missing_from(history, self._back_as)

    def _missing_from(self, history: list[Entry], member: str) -> None:
        """Back as ``member``: the own messages to everyone of earlier incarnations that
        the conversation handed over lacks (by id) never reached its giver (a frame the
        old incarnation sent as it resumed can reach the server after the return and be
        refused at the others as an old incarnation's): they go again, once."""
        received = {item[2] for item in history}
        own = self.own
        mine = [app_id for app_id, entry in own.sends.items() if entry[3]
                and app_id.rpartition("#")[0] != member
                and display_name(app_id.rpartition("#")[0]) == self.me]
        if len(history) >= HISTORY:  # only the latest were handed over
            held = [k for k, app_id in enumerate(mine) if app_id in received]
            mine = mine[held[0]:] if held else []
        missing = [app_id for app_id in mine if app_id not in received
                   and app_id not in own.resent_to and app_id not in own.to_resend]
        for app_id in missing:
            own.to_resend[app_id] = set(own.copies_of(app_id))
        if missing:
            _later(0.0, self.resend_lost, member)

    def remember_shown(self, app_id: str) -> None:
        self._shown_ids[app_id] = None
        if len(self._shown_ids) > REMEMBERED:
            self._shown_ids.popitem(last=False)

    def _show(self, sender: str, who: str, tag: Tag, text: str, ident: str,
              said: float, released: str = "") -> None:
        """One line: ``ann·3 14:02 [ann] text``, marked with the shown lines it is
        concurrent with (by their identities), and as released when it was shown
        waiting."""
        with self._lock:
            since = self._joined_at.get(sender, 0)
            concurrent = [other_id for other_id, other_sender, other in self.shown[since:]
                          if other_sender != sender and tag.concurrent_with(other)]
            self.shown.append((ident, sender, tag))
            self.remember_shown(ident)
        mark = f"  (concurrent with {', '.join(concurrent)})" if concurrent else ""
        mark += f"  ({released})" if released else ""
        self.line(f"{ident} {clock(said or time.time())} [{who}] {text}{mark}")

    # session listener
    def client_joined(self, client_name: str, application_name: str, session_name: str,
                      is_new_session: bool, is_new_application: bool,
                      all_users: Sequence[str]) -> None:
        with self._lock:
            # this person's own join is said by the app (a rejoin by on_event); a known
            # member rejoined a restarted server: it never left
            # another incarnation (or tab) of a person still here is not news either
            known = (client_name in self._known or display_name(client_name) == self.me
                     or person(client_name) in {person(m) for m in self._known})
            self._known.update((*all_users, client_name))
            self._joined_at[client_name] = len(self.shown)
            if known:
                return
        self.line(f"* {person(client_name)} joined ({', '.join(_people(all_users))})")

    def client_left(self, client_name: str, application_name: str) -> None:
        with self._lock:
            self._known.discard(client_name)
            # an old incarnation leaving after its person came back is not news
            back = person(client_name) in {person(m) for m in self._known}
        if not back:
            self.line(f"* {person(client_name)} left")
        comm = self.communicator
        if comm is None:
            return
        waiting = [mid for mid, on in comm.waiting_for().items() if client_name in on]
        if waiting:
            self.line(f"* {len(waiting)} held message(s) wait on {client_name}; "
                      f"/release {client_name} delivers them anyway (out of order if "
                      f"{client_name}'s messages are still on their way)")

    # what the communicator tells of the session, in chat words
    def on_event(self, event: SessionEvent) -> None:
        """The communicator's event listener (I/O thread)."""
        if isinstance(event, ServerSilent):
            comm = self.communicator
            direct = comm is not None and comm.routing == "direct"
            self._silent = not direct
            self.line("* no answer from the session server; retrying (" + (
                "messages go on directly)" if direct else "your messages wait for it)"))
        elif isinstance(event, ServerAnswers):
            # a restarted server: the rejoin that follows says so; else say it here
            self._rejoined = False
            _later(ANSWERS_AGAIN_AFTER, self._server_answers)
        elif isinstance(event, Rejoined):
            self._rejoined = True  # says that the server answers
            comm = self.communicator
            at = comm.server_address if comm is not None else ""
            moved, self.server_at = bool(self.server_at) and at != self.server_at, at
            if moved and event.server_restarted:
                self.line(f"* the session moved to server {at} (the one before does not "
                          "answer); reconnected")
            elif event.server_restarted:
                self.line("* session server restarted; reconnected")
            else:
                self.line("* the session took you for gone (no contact for too long); "
                          "you are back")
                self._back_as = event.member
                # from another thread, once the loop has the new member in place
                _later(0.0, self.resend_lost, event.member)
            self._went()
        elif isinstance(event, MessagesLost):
            with self._lock:
                if event.incarnation_gone:
                    # they reached no one: sent again once back (resend_lost)
                    self.own.gone_with_incarnation(event.ids)
                    if event.member == self._back_as:  # tagged by the old one, taken after
                        _later(0.0, self.resend_lost, event.member)
                    return
                self.own.dropped.update(event.ids)
            self.report_lost()

    def _went(self) -> None:
        """The server answers: the lines typed while it did not are on their way."""
        with self._lock:
            self._silent = False
            waiting, self.waiting = self.waiting, []
        if waiting:
            self.line(f"* {', '.join(waiting)} sent (typed while the session "
                      "server did not answer)")

    def resend_lost(self, member: str) -> None:
        """Back as ``member`` after the session took this client for gone: send again,
        once, the own messages its old incarnation had not sent (they reached no one)."""
        with self._lock:
            self.own.resend(member)
        self.report_lost()  # what is still lost

    def report_lost(self) -> None:
        """Say which of this person's messages the communicator reported not sent, each
        copy once."""
        with self._lock:
            self.own.report()

    def _server_answers(self) -> None:
        with self._lock:
            if not self._rejoined:
                self._rejoined = True
                self.line("* the session server answers again")
                self._went()

    def held(self, held: list[object], waiting: dict[str, list[str]]) -> None:
        """``/held``: each held message, its sender or destination, text and whom it waits on."""
        if not held:
            self.line("* held: none")
            return
        self.line(f"* held: {len(held)}")
        for message in held:
            payload = getattr(message, "user_message", None)
            text = _text_of(payload) if isinstance(payload, (str, Private, ChatLine)) else (
                repr(payload))
            sender = getattr(message, "sender", "")
            if isinstance(message, SentMessage):
                who = f"to {', '.join(_people(message.destinations))}, not sent yet"
            else:
                who = f"from {person(sender)}"
            ident = identity(sender, payload, message.app_message_id)  # type: ignore[attr-defined]
            on = waiting.get(message.message_id, [])  # type: ignore[attr-defined]
            why = f"waits on {', '.join(on)}" if on else "waits behind earlier messages"
            self.line(f"  {ident} {who}: {text!r} ({why})")


def _people(members: Sequence[str]) -> list[str]:
    """The persons ``members`` stand for, each once, in order."""
    return list(dict.fromkeys(map(person, members)))


def build_parser() -> ArgumentParser:
    parser = ArgumentParser(
        prog="groupcomm im",
        description="Chat in a session. Plain lines go to everyone else; /to NAME text to "
        "one person; /who lists members; /held shows held messages; /release NAME gives "
        "up waiting for a member who left; /quit leaves.",
    )
    add_session_arguments(parser, "im")
    parser.add_argument("--max-frame", type=int, default=Connection.max_frame, metavar="BYTES",
                        help="largest frame sent or taken (default 16 MiB, the same on "
                        "every member); a longer line is not sent, and you are told")
    return parser


def _run(args: argparse.Namespace) -> int:
    setup_logging(args.verbose)
    if args.max_frame < MIN_MAX_FRAME:
        raise CliError(f"groupcomm im: --max-frame must be at least {MIN_MAX_FRAME} bytes")
    options = session_options(args, "groupcomm im", max_frame=args.max_frame)
    terminal = is_terminal(sys.stdin, sys.stdout)
    output = terminal_output() if terminal else contextlib.nullcontext(sys.stdout)
    with output as out:
        return _chat(args, options, out, terminal)


def _chat(args: argparse.Namespace, options: SessionOptions, out: TextIO,
          terminal: bool) -> int:
    screen = ChatScreen(args.name, out)
    screen.hold_until_opening()
    root = logging.getLogger()
    if args.verbose == 0:  # warnings as chat lines, not timestamped records among them
        root.handlers[:] = [ScreenLogHandler(screen)]
    elif terminal:
        # the log goes above the input line too
        for handler in root.handlers:
            if isinstance(handler, logging.StreamHandler):
                handler.setStream(sys.stderr)
    try:
        communicator = Communicator(
            args.name, args.session, **options.communicator_kwargs,
            state=StateTransfer(provider=screen.snapshot, consumer=screen.install),
            listeners=Listeners(session=screen, message=screen.message,
                                event=screen.on_event, sent=screen.on_sent))
    except (CommunicatorError, OSError, ValueError) as error:
        screen.opening(None)  # what was said before the failure, then the error
        raise CliError(f"groupcomm im: {error}") from None
    try:  # checked against --name already; the member id may differ (alice~2)
        options.inject_delays(communicator)
    except ValueError as error:
        communicator.close()
        screen.opening(None)
        raise CliError(f"groupcomm im: {error}") from None
    screen.communicator = communicator
    screen.server_at = communicator.server_address
    watch = HeldWatch(communicator, screen.on_held)
    watch.start()
    app = ChatApp(communicator, screen)
    screen.opening(f"* {args.name} joined {args.session} with causality "
                   f"{options.selection.causality} (members: "
                   f"{', '.join(communicator.members_at_join)}); /help for commands")
    try:
        if terminal:
            read_terminal(f"{args.name}> ", app.handle)
        else:
            read_piped(sys.stdin, app.handle)
    except KeyboardInterrupt:
        pass
    finally:
        watch.stop()
        communicator.close()
        screen.line("* bye")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``groupcomm im --name NAME --session SESSION [...]``."""
    return run_main(build_parser, _run, argv)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    # so that Private pickles as groupcomm.apps.im.Private, not as __main__.Private
    from groupcomm.apps.im import main as importable_main

    sys.exit(importable_main())
