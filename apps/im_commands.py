"""What ``groupcomm im`` does with a typed line (:class:`ChatApp`: commands, or a line to
everyone) and how the framework's warnings reach the chat screen (:class:`ScreenLogHandler`).
The screen (:class:`~groupcomm.apps.im.ChatScreen`) makes and shows the payloads."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Protocol

from groupcomm.apps.im_lines import person
from groupcomm.core.causality import CausalityError
from groupcomm.core.node import UnknownPeerError
from groupcomm.core.tracing import SAID_BY_EVENT
from groupcomm.transport.communicator import Communicator, CommunicatorError


class ChatScreen(Protocol):
    """What the commands use of the chat screen (:class:`groupcomm.apps.im.ChatScreen`)."""

    def line(self, text: str, *, at_once: bool = False) -> None: ...

    def held(self, held: list[object], waiting: dict[str, list[str]]) -> None: ...

    def send(self, send: Callable[[object], list[Any]], text: str,
             to_everyone: bool = False) -> None: ...

__all__ = ["HELP", "ChatApp", "ChatScreen", "ScreenLogHandler"]

HELP = ("commands: plain text = to everyone else, /to NAME text, /who, /held, "
        "/release NAME, /quit, /help")


class ScreenLogHandler(logging.Handler):
    """Shows the framework's warnings as chat lines (``! ...``), but those a session event
    already says in chat words (marked ``said_by_event``)."""

    def __init__(self, screen: ChatScreen) -> None:
        super().__init__(logging.WARNING)
        self.screen = screen

    def emit(self, record: logging.LogRecord) -> None:
        try:
            if not getattr(record, SAID_BY_EVENT, False):
                self.screen.line(f"! {record.getMessage()}", at_once=True)
        except Exception:  # noqa: BLE001 - logging must never raise into the caller
            self.handleError(record)


class ChatApp:
    """Reads commands, sends through the communicator."""

    def __init__(self, communicator: Communicator, screen: ChatScreen) -> None:
        self.communicator = communicator
        self.screen = screen

    def handle(self, line: str) -> bool:
        """Act on one typed line; False when the user quits."""
        line = line.rstrip("\n")
        if not line.strip():
            return True
        comm = self.communicator
        try:
            if line.startswith("/"):
                command, _, rest = line.partition(" ")
                if command == "/quit":
                    return False
                if command == "/who":
                    people = dict.fromkeys(person(m) for m in comm.members)
                    self.screen.line(f"* members: {', '.join(people)}")
                elif command == "/help":
                    self.screen.line(HELP)
                elif command == "/held":
                    self.screen.held(comm.held(), comm.waiting_for())
                elif command == "/release":
                    name = rest.strip()
                    if not name:
                        self.screen.line("usage: /release NAME")
                    elif name in comm.members:
                        self.screen.line(f"* {name} is still here; /release is for members "
                                         "who left")
                    else:
                        released = comm.release_waiting_on(name)
                        self.screen.line(f"* released {len(released)} message(s) that "
                                         f"waited on {name}")
                elif command == "/to":
                    name, _, text = rest.strip().partition(" ")
                    if not name or not text.strip():
                        self.screen.line("usage: /to NAME text")
                    elif self._fits(text.strip()):
                        self.screen.send(lambda payload: comm.send([name], payload),
                                         text.strip())
                else:
                    self.screen.line(f"unknown command {command}; {HELP}")
            else:
                others = [m for m in comm.members if m != comm.name]
                if not others:
                    self.screen.line("* nobody else is here yet")
                elif self._fits(line):
                    self.screen.send(lambda payload: comm.send(comm.others, payload), line,
                                     to_everyone=True)
        except (UnknownPeerError, CausalityError, CommunicatorError, ValueError) as error:
            self.screen.line(f"! {error}")
        return True

    def _fits(self, text: str) -> bool:
        """True when ``text`` fits in a frame; else the person is told, nothing sent."""
        size = len(text.encode("utf-8", "surrogatepass"))
        limit = self.communicator.payload_limit
        if size <= limit:
            return True
        self.screen.line(f"! not sent: {size:,} bytes, the limit is {limit:,} "
                         "(split it into smaller messages)")
        return False
