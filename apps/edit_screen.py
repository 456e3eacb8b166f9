"""The screen of ``groupcomm edit`` (prompt_toolkit): the lines in view drawn from the
replica on every change (no prompt_toolkit buffer holds the text); keys become edits."""

from __future__ import annotations

import os
import re
from bisect import bisect_right
from typing import Any

from prompt_toolkit.application import Application
from prompt_toolkit.data_structures import Point
from prompt_toolkit.filters import Condition
from prompt_toolkit.formatted_text import StyleAndTextTuples
from prompt_toolkit.key_binding import (
    ConditionalKeyBindings,
    KeyBindings,
    KeyPressEvent,
    merge_key_bindings,
)
from prompt_toolkit.keys import Keys
from prompt_toolkit.layout import HSplit, Layout, Window
from prompt_toolkit.layout.controls import FormattedTextControl
from prompt_toolkit.styles import Style

from groupcomm.apps.colours import SLOTS, colour_slot
from groupcomm.apps.shared_text import SharedText

#: the palette, slot by slot as the web page's (groupcomm.apps.colours: a person has the
#: same colour here and in every browser tab)
COLOURS = ("ansired", "ansigreen", "ansiblue", "ansimagenta", "ansicyan", "ansiyellow")
assert len(COLOURS) == SLOTS


def default_save_path(session: str) -> str:
    """A new file named after ``session`` here (``./paper.txt``, ``./paper-2.txt``, ...)."""
    stem = re.sub(r"[^A-Za-z0-9._-]+", "_", session).strip("._") or "text"
    path, number = f"./{stem}.txt", 2
    while os.path.exists(path):
        path, number = f"./{stem}-{number}.txt", number + 1
    return path


def fit_status(parts: list[tuple[int, str]], width: int, keys: str) -> str:
    """The status line in ``width`` columns: ``parts`` (priority, text), then ``keys``;
    the parts of highest number go first until the rest fits (``keys`` before any but
    priorities 0 and 1), and a last part too long is cut with an ellipsis."""
    kept = list(parts)
    show_keys = True

    def render() -> str:
        text = " " + " · ".join(part for _, part in kept)
        return text + ("   " + keys if show_keys and keys else "")

    while len(render()) > width and kept:
        lowest = max(priority for priority, _ in kept)
        if show_keys and lowest < 2:
            show_keys = False
            continue
        if len(kept) == 1:
            break
        kept.remove(next(p for p in reversed(kept) if p[0] == lowest))
    line = render()
    if len(line) > width:
        line = line[:max(0, width - 1)] + "…"
    return line


class LineIndex:
    """Where each line of a text starts: position <-> (line, column) by bisection."""

    def __init__(self, text: str) -> None:
        self.length = len(text)
        starts = [0]  # by str.find: no list of line strings
        find = text.find
        at = find("\n")
        while at >= 0:
            starts.append(at + 1)
            at = find("\n", at + 1)
        self.starts = starts

    @property
    def lines(self) -> int:
        return len(self.starts)

    def line_and_column(self, position: int) -> tuple[int, int]:
        line = bisect_right(self.starts, position) - 1
        return line, position - self.starts[line]

    def line_end(self, line: int) -> int:
        """The position of ``line``'s newline (or of the end of the text)."""
        return self.starts[line + 1] - 1 if line + 1 < len(self.starts) else self.length

    def position_of(self, line: int, column: int) -> int:
        """The position at ``line``, ``column`` (clamped)."""
        line = max(0, min(line, len(self.starts) - 1))
        start = self.starts[line]
        return start + max(0, min(column, self.line_end(line) - start))


class EditScreen:
    def __init__(self, shared: SharedText, session: str, module: str, *,
                 warning: str | None = None, file: str | None = None) -> None:
        self.shared = shared
        self.session = session
        self.module = module
        self.warning = warning
        self.file = file
        self.status_log: Any = None
        self.note = ""
        #: the question shown while Ctrl-Q waits for y/n/s (no ``--file``)
        self.asking = ""
        self.asking_note = ""
        #: where the text was saved on the way out, if it was (no ``--file``)
        self.saved_to: str | None = None
        self.saved_chars = 0
        self._colour: dict[str, str] = {}
        self._cursor = Point(0, 0)
        self._top = 0  # the first line shown
        self._index: tuple[str, LineIndex] | None = None
        text_control = FormattedTextControl(self._text_fragments, focusable=True,
                                            show_cursor=True,
                                            get_cursor_position=lambda: self._cursor)
        rows = [Window(FormattedTextControl(self._title), height=1, style="class:bar")]
        if warning:
            rows.append(Window(FormattedTextControl(
                [("class:warning", f" ! copies may diverge: {warning}")]), height=1))
        rows += [Window(text_control, wrap_lines=False),
                 Window(FormattedTextControl(self._status), height=1, style="class:bar")]
        self.app: Application = Application(
            layout=Layout(HSplit(rows), focused_element=text_control),
            key_bindings=self._keys(), full_screen=True, mouse_support=False,
            style=Style.from_dict({"bar": "reverse", "warning": "bold ansired",
                                   **{f"c{k}": f"bg:{c} fg:ansiblack"
                                      for k, c in enumerate(COLOURS)}}))

    def run(self) -> None:
        self.app.run()

    def refresh(self) -> None:
        """Redraw soon (any thread)."""
        if self.app.is_running:
            self.app.invalidate()

    def _colour_of(self, member: str) -> str:
        return self._colour.setdefault(member, f"class:c{colour_slot(member)}")

    def _title(self) -> StyleAndTextTuples:
        shared = self.shared
        with shared.lock:
            members = list(shared.replica.members)
        parts: StyleAndTextTuples = [("", f" {self.session} · members: ")]
        for k, member in enumerate(members):
            if k:
                parts.append(("", ", "))
            parts.append(("bold", f"{member} (you)") if member == shared.replica.me
                         else (self._colour_of(member), member))
        return parts

    def _lines(self, value: str) -> LineIndex:
        cached = self._index
        if cached is None or cached[0] is not value:
            cached = self._index = (value, LineIndex(value))
        return cached[1]

    def _size(self) -> tuple[int, int]:
        try:
            size = self.app.output.get_size()
        except Exception:  # noqa: BLE001 - no terminal size: a common one
            return 24, 80
        return size.rows, size.columns

    def _text_fragments(self) -> StyleAndTextTuples:
        value, mine, others = self.shared.view()
        lines = self._lines(value)
        line, column = lines.line_and_column(mine)
        height = max(1, self._size()[0] - 2 - (1 if self.warning else 0))
        top = max(min(self._top, line), line - height + 1)  # the cursor's line in view
        self._top = max(0, min(top, lines.lines - 1))
        first = lines.starts[self._top]
        last = lines.line_end(min(lines.lines - 1, self._top + height - 1))
        self._cursor = Point(x=column, y=line - self._top)
        at: dict[int, str] = {}
        for member, position in sorted(others.items()):
            if first <= position <= last:
                at.setdefault(position, self._colour_of(member))
        fragments: StyleAndTextTuples = []
        start = first
        for position in sorted(at):
            fragments.append(("", value[start:position]))
            char = value[position:position + 1] if position < last else ""
            if char in ("", "\n"):  # a cursor at the end of a line: a coloured blank
                fragments.append((at[position], " "))
                fragments.append(("", char))
            else:
                fragments.append((at[position], char))
            start = position + 1
        fragments.append(("", value[start:last]))
        return fragments

    def _status(self) -> StyleAndTextTuples:
        """Failures, module, length, the latest note, the keys and the tombstones this
        copy keeps, what fits (see :func:`fit_status`)."""
        if self.asking:
            return [("class:warning", fit_status([(0, self.asking), (1, self.asking_note)],
                                                 self._size()[1], ""))]
        shared = self.shared
        with shared.lock:
            length = len(shared.view()[0])
            remembered = shared.replica.text.tombstones
            failures = shared.replica.failures
        parts: list[tuple[int, str]] = []  # (priority, text): 0 is kept longest
        if failures:
            parts.append((0, f"{failures} edit(s) failed: copies differ"))
        parts += [(3, self.module), (2, f"{length} chars")]
        if remembered:  # each copy collects on its own schedule: this copy's number
            parts.append((5, f"{remembered} deleted chars remembered locally"))
        latest = self.note or shared.notice or (
            self.status_log.latest if self.status_log else "")
        if latest:
            parts.append((1, latest))
        keys = "^S save  ^Q quit" if self.file else "^Q quit"
        return [("", fit_status(parts, self._size()[1], keys))]

    def _keys(self) -> Any:
        keys = KeyBindings()
        shared = self.shared

        def move_lines(delta: int) -> None:
            value, mine, _ = shared.view()
            lines = self._lines(value)
            line, column = lines.line_and_column(mine)
            shared.move_to(lines.position_of(line + delta, column))

        def to_line_edge(end: bool) -> None:
            value, mine, _ = shared.view()
            lines = self._lines(value)
            line = lines.line_and_column(mine)[0]
            shared.move_to(lines.line_end(line) if end else lines.starts[line])

        @keys.add(Keys.Any)
        def _(event: KeyPressEvent) -> None:
            if event.data and event.data.isprintable():
                self._edit(shared.insert, event.data)

        @keys.add(Keys.BracketedPaste)
        def _(event: KeyPressEvent) -> None:
            text = event.data.replace("\r\n", "\n").replace("\r", "\n")
            if text:
                self._edit(shared.insert, text)

        # key -> the edit it makes and its arguments
        edits: dict[str, tuple[Any, ...]] = {
            "enter": (shared.insert, "\n"), "tab": (shared.insert, "    "),
            "backspace": (shared.backspace,), "delete": (shared.delete,),
            "left": (lambda: shared.move_to(shared.position - 1),),
            "right": (lambda: shared.move_to(shared.position + 1),),
            "up": (move_lines, -1), "down": (move_lines, 1),
            "pageup": (move_lines, -20), "pagedown": (move_lines, 20),
            "home": (to_line_edge, False), "end": (to_line_edge, True)}
        for key, (action, *args) in edits.items():
            keys.add(key)(lambda event, action=action, args=args: self._edit(action, *args))

        @keys.add("c-s")
        def _(event: KeyPressEvent) -> None:
            if not self.file:
                self.note = "no --file to save to"
                return
            try:
                self.note = f"saved {shared.save(self.file)} characters to {self.file}"
            except OSError as error:
                self.note = f"not saved: {error}"

        @keys.add("c-q")
        @keys.add("c-c")
        def _(event: KeyPressEvent) -> None:
            """Leave; without ``--file`` and with some text, ask first."""
            with shared.lock:
                replica = shared.replica
                empty = replica.text.visible_length() == 0
                alone = set(replica.members) <= {replica.me}
            if self.file or empty:
                event.app.exit()
                return
            self.asking = (f"quit without saving? y quit · n stay · s save to "
                           f"{default_save_path(self.session)}")
            self.asking_note = ("nobody else has the text" if alone else "the others keep the text")

        asking = Condition(lambda: bool(self.asking))
        answers = KeyBindings()

        @answers.add("y")
        @answers.add("Y")
        @answers.add("c-q")
        @answers.add("c-c")
        def _(event: KeyPressEvent) -> None:
            event.app.exit()

        @answers.add("s")
        @answers.add("S")
        def _(event: KeyPressEvent) -> None:
            path = default_save_path(self.session)
            try:
                self.saved_chars = shared.save(path)
            except OSError as error:
                self.asking = ""
                self.note = f"not saved: {error}"
                return
            self.saved_to = os.path.abspath(path)
            event.app.exit()

        @answers.add(Keys.Any)
        def _(event: KeyPressEvent) -> None:  # n, Escape, anything else: stay
            self.asking = ""
            self.note = "not quitting"

        return merge_key_bindings([ConditionalKeyBindings(keys, ~asking),
                                   ConditionalKeyBindings(answers, asking)])

    def _edit(self, action, *args: Any) -> None:
        """Run a key's edit; a refused one becomes the status line."""
        self.note = ""
        try:
            action(*args)
        except Exception as error:  # noqa: BLE001 - shown, and the editor goes on
            self.note = f"not done: {error}"
