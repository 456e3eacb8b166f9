"""``groupcomm edit --batch``: the editor driven by commands on stdin, for scripts and
tests (the commands: docs/commands.md, "edit")."""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable
from typing import Any, TextIO

from groupcomm.apps.shared_text import SharedText

#: seconds a wait-text or quiet waits at most unless told
WAIT = 30.0


class BatchEditor:
    def __init__(self, shared: SharedText, out: TextIO) -> None:
        self.shared = shared
        self.out = out

    def say(self, line: str) -> None:
        self.out.write(line + "\n")
        self.out.flush()

    def run(self, lines: TextIO) -> None:
        for line in lines:
            if not self.handle(line.strip()):
                return

    def handle(self, line: str) -> bool:
        """Act on one command; False on ``quit``."""
        if not line:
            return True
        command, _, rest = line.partition(" ")
        try:
            if command == "quit":
                return False
            commands = self._commands()
            if command not in commands:
                raise ValueError(f"unknown command {command!r} ({', '.join(commands)}, quit)")
            commands[command](rest.strip())
        except Exception as error:  # noqa: BLE001 - one line per bad command, go on
            self.say(f"error {command}: {error}")
        return True

    def _commands(self) -> dict[str, Callable[[str], None]]:
        shared = self.shared
        return {
            "type": lambda rest: shared.insert(_text(rest)),
            "goto": lambda rest: shared.move_to(int(rest)),
            "end": lambda rest: shared.move_to(shared.replica.text.visible_length()),
            "backspace": lambda rest: [shared.backspace() for _ in range(_count(rest))],
            "delete": lambda rest: [shared.delete() for _ in range(_count(rest))],
            "wait-text": self._wait_text,
            "quiet": self._quiet,
            "wait-members": self._wait_members,
            "random": self._random,
            "wait-applied": self._wait_applied,
            "show": self._show,
            "typing": self._typing,
        }

    def _show(self, rest: str) -> None:
        self.shared.flush()
        self.say("text " + json.dumps(self.state()))

    def state(self) -> dict[str, Any]:
        shared = self.shared
        with shared.lock:
            replica = shared.replica
            state = {"text": replica.text.value, "failures": replica.failures,
                     "last_failure": replica.last_failure, "members": list(replica.members),
                     "kept": len(replica.text), "applied": replica.applied,
                     "notice": shared.notice}
        if shared.communicator is not None:  # what it put on the wire (text-wire)
            counters = shared.communicator.counters()
            for name in ("frames_sent", "frame_bytes_sent", "app_sends", "clock_acks_sent",
                         "clock_acks_received"):
                state[name] = counters.get(name, 0)
        return state

    def _why(self) -> str:
        """What the communicator counted (held, rejected, lost...), to tell why a wait
        failed: the counters that are not zero."""
        communicator = self.shared.communicator
        if communicator is None:
            return ""
        try:
            counters = communicator.counters()
        except Exception as error:  # noqa: BLE001 - a diagnosis must not hide the failure
            return f" (no counters: {error})"
        shown = ", ".join(f"{k}={v}" for k, v in sorted(counters.items())
                          if v and k not in ("frames_sent", "frame_bytes_sent"))
        return f"; members {list(self.shared.replica.members)}; counters: {shown}"

    def _wait_text(self, rest: str) -> None:
        wanted, _, timeout = rest.rpartition(" ") if rest.endswith(tuple("0123456789")) \
            else (rest, "", "")
        text = _text(wanted)
        _wait(lambda: text in self.shared.view()[0], timeout, lambda: f"{text!r} did not appear")
        self.say(f"seen {json.dumps(text)}")

    def _random(self, rest: str) -> None:
        count, _, seed = rest.partition(" ")
        rng = random.Random(int(seed) if seed else None)
        shared = self.shared
        for _ in range(_count(count)):  # one edit each: the cursor jumps unannounced
            length = shared.replica.text.visible_length()
            if length and rng.random() < 0.3:
                shared.move_to(rng.randint(1, length), announce=False)
                shared.backspace()
            else:
                shared.move_to(rng.randint(0, length), announce=False)
                shared.insert("abc"[:rng.randint(1, 3)])
        self.say(f"done {count}")

    def _typing(self, rest: str) -> None:
        count_text, rate_text, seed = (rest.split() + ["", ""])[:3]
        count, rate = _count(count_text), float(rate_text or "nan")
        if not 0 < rate <= 1000:
            raise ValueError(f"give the rate in keystrokes a second (0 < RATE <= 1000), "
                             f"not {rate_text!r}")
        rng = random.Random(int(seed) if seed else None)
        shared = self.shared
        keys: list[list[Any]] = []
        next_at = time.monotonic()
        for _ in range(count):
            next_at += rng.uniform(0.5, 1.5) / rate
            pause = next_at - time.monotonic()
            if pause > 0:
                time.sleep(pause)
            keys.append(_keystroke(shared, rng))
        shared.flush()
        self.say("keys " + json.dumps(keys, separators=(",", ":")))
        self.say(f"typed {count}")

    def _wait_applied(self, rest: str) -> None:
        count, _, timeout = rest.partition(" ")
        wanted = int(count)
        replica = self.shared.replica
        _wait(lambda: replica.applied >= wanted, timeout,
              lambda: f"{replica.applied} edit(s) applied, not {wanted}{self._why()}",
              pause=0.001)
        self.say(f"applied {replica.applied} at {time.time():.6f}")

    def _wait_members(self, rest: str) -> None:
        count, _, timeout = rest.partition(" ")
        wanted = int(count)
        replica = self.shared.replica
        _wait(lambda: len(replica.members) >= wanted, timeout,
              lambda: f"{len(replica.members)} member(s), not {wanted}")
        self.say("members " + ", ".join(replica.members))

    def _quiet(self, rest: str) -> None:
        """Nothing applied for ``rest`` seconds (default 1) and nothing held."""
        still = float(rest) if rest else 1.0
        self.shared.flush()
        comm = self.shared.communicator
        deadline = time.monotonic() + WAIT + still
        replica = self.shared.replica
        applied, since = replica.applied, time.monotonic()
        while time.monotonic() < deadline:
            now_applied = replica.applied
            if now_applied != applied or comm.held():
                applied, since = now_applied, time.monotonic()
            elif time.monotonic() - since >= still:
                self.say("quiet")
                return
            time.sleep(0.02)
        raise TimeoutError(f"edits kept arriving (or stayed held) for {WAIT:g} s")


#: letters of the words the typing mode types, weighted roughly as in English
LETTERS = "eeeeeeeeeeeetttttttttaaaaaaaaoooooooiiiiiiinnnnnnnsssssshhhhhhrrrrrrddddlllluuu"


def _keystroke(shared: SharedText, rng: random.Random) -> list[Any]:
    """One keystroke of a person typing words; returns what it was."""
    at = shared.position
    roll = rng.random()
    if roll < 0.03:
        shared.backspace()
        return ["b", at]
    if roll < 0.05:
        shared.delete()
        return ["d", at]
    if roll < 0.07:
        length = len(shared.view()[0])
        to = rng.randint(0, length)
        shared.move_to(to)
        return ["m", to]
    char = " " if rng.random() < 0.18 else rng.choice(LETTERS)
    shared.insert(char)
    return ["i", at, char]


def _wait(done: Callable[[], bool], timeout: str, failure: Callable[[], str],
          pause: float = 0.02) -> None:
    """Until ``done()``, at most ``timeout`` seconds (empty: :data:`WAIT`);
    ``TimeoutError`` saying ``failure()`` after that."""
    deadline = time.monotonic() + (float(timeout) if timeout else WAIT)
    while not done():
        if time.monotonic() > deadline:
            raise TimeoutError(failure())
        time.sleep(pause)


def _text(argument: str) -> str:
    try:
        value = json.loads(argument)
    except json.JSONDecodeError:
        raise ValueError(f"give the text as a JSON string, e.g. \"Hello\", not {argument!r}") \
            from None
    if not isinstance(value, str) or not value:
        raise ValueError(f"give a non-empty JSON string, not {argument!r}")
    return value


def _count(argument: str) -> int:
    count = int(argument) if argument else 1
    if count < 1:
        raise ValueError("the count must be >= 1")
    return count
