"""``groupcomm edit --batch`` processes driven from another, for the benchmarks and the
tests: one editor, or a session server on 127.0.0.1 with several editors in it."""

from __future__ import annotations

import json
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from groupcomm.tools.procs import LineProcess, ProcessError, ServerProcess
from groupcomm.transport.keys import write_new_key


class EditorProcess(LineProcess):
    """One ``groupcomm edit --batch``, started and joined."""

    def __init__(self, name: str, session: str, server: str, key_file: Path | str,
                 causality: str, *extra: str, timeout: float = 20.0) -> None:
        super().__init__(name, [
            sys.executable, "-m", "groupcomm.apps.edit", "--batch", "--name", name,
            "--session", session, "--server", server, "--key-file", str(key_file),
            "--causality", causality, *extra])
        self.wait_line(lambda line: f" joined {session}" in line, timeout, "its join")
        self._asked: tuple[tuple[str, ...], int] = ((), 0)

    def ask(self, command: str, answers: tuple[str, ...], timeout: float = 20.0,
            what: str = "an answer", raise_errors: bool = True) -> str:
        """Type ``command`` and return the next line that starts with one of ``answers``
        or with ``error`` (:class:`ProcessError` for that, unless not ``raise_errors``)."""
        self.command(command, answers)
        return self.answer(timeout, what, raise_errors)

    def command(self, command: str, answers: tuple[str, ...]) -> None:
        """Type ``command``; :meth:`answer` waits for its answer."""
        prefixes = (*answers, "error")
        self._asked = (prefixes, len(self._answered(prefixes)))
        self.type(command)

    def answer(self, timeout: float = 20.0, what: str = "an answer",
               raise_errors: bool = True) -> str:
        prefixes, before = self._asked
        self.wait_line(lambda _: len(self._answered(prefixes)) > before, timeout, what)
        line = self._answered(prefixes)[before]
        if raise_errors and line.startswith("error"):
            raise ProcessError(f"{self.name}: {line}")
        return line

    def _answered(self, prefixes: tuple[str, ...]) -> list[str]:
        return [line for line in self.lines if line.startswith(prefixes)]

    def state(self, timeout: float = 20.0) -> dict[str, Any]:
        """What ``show`` prints."""
        return json.loads(self.ask("show", ("text ",), timeout, "show")[5:])

    def wait_members(self, count: int, timeout: float = 20.0) -> None:
        self.ask(f"wait-members {count} {timeout:g}", ("members ",), timeout * 2,
                 f"{count} members")


class EditorSession:
    """A session server and one batch editor per name; a context manager."""

    def __init__(self, names: Sequence[str], causality: str, *extra: str,
                 session: str = "edit", timeout: float = 20.0) -> None:
        self._folder = tempfile.TemporaryDirectory(prefix="groupcomm-editors-")
        self.folder = Path(self._folder.name)
        self.key_file = self.folder / "session.key"
        write_new_key(self.key_file)
        self.server = ServerProcess(self.key_file)
        self.causality = causality
        self.editors: list[EditorProcess] = []
        try:
            for name in names:
                self.editors.append(self.editor(name, session, *extra, timeout=timeout))
            for editor in self.editors:
                editor.wait_members(len(names), timeout)
        except BaseException:
            self.close()
            raise

    def editor(self, name: str, session: str, *extra: str, timeout: float = 20.0) -> EditorProcess:
        """Another editor on this server (not among :attr:`editors`)."""
        return EditorProcess(name, session, self.server.address, self.key_file,
                             self.causality, *extra, timeout=timeout)

    def ask_all(self, commands: Sequence[str], answers: tuple[str, ...],
                timeout: float = 20.0, what: str = "an answer",
                raise_errors: bool = True) -> list[str]:
        """Give every editor its command, then wait for each answer."""
        for editor, command in zip(self.editors, commands, strict=True):
            editor.command(command, answers)
        return [editor.answer(timeout, what, raise_errors) for editor in self.editors]

    def states(self, timeout: float = 20.0) -> list[dict[str, Any]]:
        return [editor.state(timeout) for editor in self.editors]

    def close(self) -> None:
        for editor in self.editors:
            editor.quit("quit")
        self.server.terminate()
        self._folder.cleanup()

    def __enter__(self) -> EditorSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
