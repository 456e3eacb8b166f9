"""How ``groupcomm im`` reads what the person types.

In a terminal, an input line of prompt_toolkit at the bottom of the screen: it takes a
line of any length (the terminal's own line editing, which cuts a line at 4,095
characters, is off), what arrives meanwhile is printed above it without breaking it,
and a line sent is erased from the input line (the chat shows it once, numbered). A
paste of several lines is several chat lines, as typed. When stdin is not a terminal
(a pipe, a file: scripted use), lines are read as they come, of any length.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator
from typing import TextIO

#: acts on one line typed (without its end of line); False when the person quits
LineHandler = Callable[[str], bool]


def is_terminal(stdin: TextIO, stdout: TextIO) -> bool:
    """True when both ends are a terminal: the prompt_toolkit input line is used."""
    try:
        return stdin.isatty() and stdout.isatty()
    except (AttributeError, ValueError):
        return False


def read_piped(stream: TextIO, handle: LineHandler) -> None:
    """Hand ``handle`` each line of ``stream`` (any length) until it returns False or
    the stream ends."""
    while True:
        line = stream.readline()
        if not line:
            return
        if not handle(line.rstrip("\r\n")):
            return


@contextlib.contextmanager
def terminal_output() -> Iterator[TextIO]:
    """``sys.stdout`` redirected so that what is printed goes above the input line;
    yields the stream the chat writes to."""
    from prompt_toolkit.patch_stdout import patch_stdout

    with patch_stdout():
        yield sys.stdout


class TerminalInput:
    """The input line: reads lines of any length with a prompt until the person quits
    (``handle`` returns False) or presses Ctrl-D on an empty line."""

    def __init__(self, prompt: str) -> None:
        from prompt_toolkit import PromptSession

        self.prompt = prompt
        # erase_when_done: the accepted line leaves the input line; the chat shows it
        # (numbered) once it is sent
        self.session: PromptSession[str] = PromptSession(erase_when_done=True)

    def run(self, handle: LineHandler) -> None:
        """Read and hand on lines (Ctrl-C propagates as KeyboardInterrupt)."""
        while True:
            try:
                text = self.session.prompt(self.prompt)
            except EOFError:
                return
            # a paste of several lines is several lines typed
            for line in text.split("\n"):
                if not handle(line):
                    return
