"""How ``groupcomm im`` reads what the person types: in a terminal, a prompt_toolkit
input line under the messages (lines of any length, unlike the terminal's own line
editing; a paste of several lines is several chat lines; characters that arrive
together are inserted in one step, not one key press each); otherwise lines as they come."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from prompt_toolkit.key_binding import KeyPress

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
    for line in iter(stream.readline, ""):
        if not handle(line.rstrip("\r\n")):
            return


@contextlib.contextmanager
def terminal_output() -> Iterator[TextIO]:
    """``sys.stdout`` redirected so that what is printed goes above the input line;
    yields the stream the chat writes to."""
    from prompt_toolkit.patch_stdout import patch_stdout

    with patch_stdout():
        yield sys.stdout


def _plain(key: KeyPress) -> bool:
    """A printable character (the keys named by prompt_toolkit have longer names)."""
    return len(key.key) == 1 and key.key.isprintable()


class KeyCoalescer:
    """Turns each run of printable characters read at once into one insertion (a
    ``BracketedPaste`` key press). The first character after another key than Enter
    stays a key press of its own: it may complete a combination (Escape, then x)."""

    def __init__(self) -> None:
        self._last: KeyPress | None = None

    def __call__(self, keys: list[KeyPress]) -> list[KeyPress]:
        from prompt_toolkit.key_binding import KeyPress
        from prompt_toolkit.keys import Keys

        out: list[KeyPress] = []
        run: list[KeyPress] = []

        def end_run() -> None:
            if len(run) > 1:
                out.append(KeyPress(Keys.BracketedPaste, "".join(k.data for k in run)))
            else:
                out.extend(run)
            run.clear()

        for key in keys:
            if _plain(key):
                last = self._last
                if not run and last is not None and not _plain(last) and last.key not in (
                        Keys.ControlM, Keys.ControlJ, Keys.BracketedPaste):
                    out.append(key)  # may complete a combination: keep it a key press
                else:
                    run.append(key)
            else:
                end_run()
                out.append(key)
            self._last = key
        end_run()
        return out


def _coalescing_input() -> object:
    """prompt_toolkit's terminal input, with :class:`KeyCoalescer` over what it reads."""
    from prompt_toolkit.input.vt100 import Vt100Input

    class CoalescingInput(Vt100Input):
        def __init__(self) -> None:
            super().__init__(sys.stdin)
            self._coalesce = KeyCoalescer()

        def read_keys(self) -> list[KeyPress]:
            return self._coalesce(super().read_keys())

        def flush_keys(self) -> list[KeyPress]:
            return self._coalesce(super().flush_keys())

    return CoalescingInput()


def read_terminal(prompt: str, handle: LineHandler) -> None:
    """The input line: hand ``handle`` each line typed (a paste of several lines is
    several lines) until it returns False or Ctrl-D on an empty line; Ctrl-C propagates
    as KeyboardInterrupt."""
    from prompt_toolkit import PromptSession

    # erase_when_done: the chat shows the accepted line (numbered) once it is sent
    session: PromptSession[str] = PromptSession(
        erase_when_done=True, input=_coalescing_input())  # type: ignore[arg-type]
    while True:
        try:
            text = session.prompt(prompt)
        except EOFError:
            return
        for line in text.split("\n"):
            if not handle(line):
                return
