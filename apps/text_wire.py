"""``groupcomm text-wire``: bytes on the wire per keystroke of the shared editor, against
Yjs (BENCHMARKS.md, "Bytes on the wire per keystroke")."""

from __future__ import annotations

import argparse
import itertools
import json
import random
import time
from collections.abc import Sequence
from typing import Any

from groupcomm.apps.batch_editors import EditorSession
from groupcomm.apps.shared_text import DEFAULT_WINDOW
from groupcomm.apps.text_trace import say
from groupcomm.cli.args import (
    ArgumentParser,
    CliError,
    add_output_arguments,
    checked_module,
    run_main,
    setup_logging,
)
from groupcomm.core.registry import get_module
from groupcomm.tools.frame_anatomy import keystroke_fields
from groupcomm.tools.procs import ProcessError

NAMES = ("p1", "p2", "p3")
SESSION = "wire"


def run_editors(module: str, window_ms: float, keys: int, rate: float, seed: int,
                timeout: float, reliable: bool = True) -> dict[str, Any]:
    """Three editors typing at once under ``module``, coalescing ``window_ms``, with the
    reliable layer as ``groupcomm edit`` runs by default unless not ``reliable``;
    ``ProcessError`` when a process fails."""
    options = () if reliable else ("--no-reliable",)
    with EditorSession(NAMES, module, "--coalesce", f"{window_ms:g}", *options,
                       session=SESSION, timeout=timeout) as editors:
        started = time.monotonic()
        logs = [json.loads(line[5:]) for line in editors.ask_all(
            [f"typing {keys} {rate:g} {seed + k}" for k in range(len(NAMES))], ("keys ",),
            timeout + keys / rate * 2, "its typing")]
        typed = time.monotonic() - started
        editors.ask_all(["quiet 0.5"] * len(NAMES), ("quiet",), timeout * 2, "quiet",
                        raise_errors=False)
        settled = time.monotonic() - started
        states = editors.states(timeout)
    keystrokes = sum(len(log) for log in logs)
    frames = sum(s["frames_sent"] for s in states)
    wire = sum(s["frame_bytes_sent"] for s in states)
    result: dict[str, Any] = {
        "module": module, "coalesce_ms": window_ms, "reliable": reliable,
        "keystrokes": keystrokes,
        "operations": sum(s.get("app_sends", 0) for s in states),
        "typing_seconds": round(typed, 2), "settled_seconds": round(settled, 2),
        "keystrokes_per_second": round(keystrokes / typed, 1),
        "identical": len({s["text"] for s in states}) == 1,
        "failed_edits": sum(s["failures"] for s in states),
        "characters": len(states[0]["text"]), "frames": frames, "wire_bytes": wire,
        "wire_bytes_per_keystroke": round(wire / keystrokes, 1),
        "bytes_per_frame": round(wire / max(1, frames), 1), "keys": logs}
    say(f"  {module}, coalescing {window_ms:g} ms: {keystrokes} keystrokes in "
        f"{typed:.1f} s, copies {'identical' if result['identical'] else 'DIFFERENT'}")
    return result


def yjs_bytes(logs: Sequence[Sequence[Sequence[Any]]], seed: int) -> dict[str, Any] | None:
    """The Yjs updates of the same keystrokes; ``None`` without pycrdt."""
    try:
        from pycrdt import Doc, Text
    except ImportError:
        return None
    rng = random.Random(seed)
    docs = [Doc(client_id=rng.getrandbits(32)) for _ in logs]
    texts = [doc.get("text", type=Text) for doc in docs]
    sizes: list[int] = []
    # each transaction's update, as a provider sends it (Yjs's doc.on("update")), not a
    # diff from a state vector, which repeats every deletion ever made
    updates: list[tuple[int, bytes]] = []
    for who, doc in enumerate(docs):
        doc.observe(lambda event, who=who: updates.append((who, event.update)))
    for k in range(max(len(log) for log in logs)):
        for who, log in enumerate(logs):
            if k >= len(log):
                continue
            key, text = log[k], texts[who]
            length = len(str(text))
            at = max(0, min(int(key[1]), length))
            updates.clear()
            if key[0] == "i":
                text.insert(at, key[2])
            elif key[0] == "b" and at > 0:
                del text[at - 1]
            elif key[0] == "d" and at < length:
                del text[at]
            else:
                continue  # a move: Yjs's awareness, not a document update
            own = [update for origin, update in updates if origin == who]
            sizes.extend(len(update) for update in own)
            for update in own:
                for other, other_doc in enumerate(docs):
                    if other != who:
                        other_doc.apply_update(update)
    keystrokes = sum(len(log) for log in logs)
    return {"updates": len(sizes), "update_bytes": sum(sizes),
            "bytes_per_keystroke": round(sum(sizes) / max(1, keystrokes), 1),
            "bytes_per_update": round(sum(sizes) / max(1, len(sizes)), 1),
            "identical": len({str(t) for t in texts}) == 1}


def keystroke_times(chars: int, keys: int = 60, window: float = DEFAULT_WINDOW) -> dict[str, float]:
    """Milliseconds (median, 90th percentile) the editor spends per typed key and per
    cursor move at a text of ``chars`` characters, a drawing of the screen included."""
    from prompt_toolkit.application import create_app_session
    from prompt_toolkit.application.current import set_app
    from prompt_toolkit.input import create_pipe_input
    from prompt_toolkit.layout.mouse_handlers import MouseHandlers
    from prompt_toolkit.layout.screen import Screen, WritePosition
    from prompt_toolkit.output import DummyOutput

    from groupcomm.apps.edit_screen import EditScreen
    from groupcomm.apps.shared_text import SharedText
    from groupcomm.core.messages import Tag

    rng = random.Random(1)
    words = "the of and a to in is that for it as was with be by on not he this".split()
    lines, total = [], 0
    while total < chars:
        lines.append(" ".join(rng.choice(words) for _ in range(12))[:79])
        total += len(lines[-1]) + 1
    shared = SharedText("me", window=window)
    sends = itertools.count(1)

    def send(payload: Any) -> tuple[str, Tag]:
        sent = next(sends)
        return f"me#{sent}", Tag({"me": sent})

    shared.replica.send = send
    shared.replica.joined("me", ["me", "you"])
    shared.insert("\n".join(lines)[:chars])
    shared.move_to(chars // 2)
    typed: list[float] = []
    moved: list[float] = []
    try:
        with create_pipe_input() as pipe, create_app_session(input=pipe, output=DummyOutput()):
            screen = EditScreen(shared, SESSION, "matrix")

            def draw() -> None:
                with set_app(screen.app):
                    screen.app.layout.container.write_to_screen(
                        Screen(), MouseHandlers(), WritePosition(0, 0, 100, 40), "",
                        erase_bg=False, z_index=None)

            draw()
            for k in range(keys):
                started = time.perf_counter()
                shared.insert("abcdefghij"[k % 10])
                draw()
                typed.append(time.perf_counter() - started)
            for _ in range(keys // 3):
                started = time.perf_counter()
                shared.move_to(shared.position - 1)
                draw()
                moved.append(time.perf_counter() - started)
    finally:
        shared.close()

    def ms(samples: list[float], share: float) -> float:
        return round(sorted(samples)[int(len(samples) * share)] * 1000, 2)

    return {"characters": len(shared.view()[0]), "key_median_ms": ms(typed, 0.5),
            "key_p90_ms": ms(typed, 0.9), "move_median_ms": ms(moved, 0.5)}


def build_parser() -> ArgumentParser:
    parser = ArgumentParser(
        prog="groupcomm text-wire",
        description="Bytes on the wire per keystroke of groupcomm edit: three editor "
        "processes typing at once, with and without coalescing, against Yjs updates of "
        "the same keystrokes.")
    parser.add_argument("--causality", action="append", metavar="NAME",
                        help="module(s) (repeatable; default matrix and ks)")
    parser.add_argument("--coalesce", action="append", type=float, metavar="MS",
                        help="coalescing window(s) (repeatable; default 0 and edit's default, "
                        f"{DEFAULT_WINDOW * 1000:g})")
    parser.add_argument("--keys", type=int, default=80, help="keystrokes per person (default 80)")
    parser.add_argument("--rate", type=float, default=8.0,
                        help="keystrokes a second per person (default 8)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--fields", action="store_true",
                        help="also break one keystroke's frame down field by field")
    parser.add_argument("--screen", type=int, metavar="CHARS",
                        help="also time a key and a move, screen drawn, at CHARS characters")
    parser.add_argument("--no-reliable", action="store_true",
                        help="editors without the reliable layer (its numbering and "
                        "acknowledgements are then not on the wire)")
    parser.add_argument("--timeout", type=float, default=60.0)
    add_output_arguments(parser)
    return parser


def _run(args: argparse.Namespace) -> int:
    setup_logging(args.verbose)
    prog = "groupcomm text-wire"
    if args.screen is not None and not 1 <= args.screen <= 10_000_000:
        raise CliError(f"{prog}: --screen must be between 1 and 10000000 characters")
    if args.keys < 1 or not 0 < args.rate <= 1000:
        raise CliError(f"{prog}: --keys must be >= 1 and --rate between 0 and 1000")
    windows = args.coalesce if args.coalesce is not None else [0.0, DEFAULT_WINDOW * 1000]
    if any(not 0 <= w <= 10_000 for w in windows):
        raise CliError(f"{prog}: --coalesce must be between 0 and 10000 ms")
    modules = args.causality or ["matrix", "ks"]
    for module in modules:
        checked_module(get_module, module, prog, warn=False)

    runs = []
    for module in modules:
        for window in windows:
            say(f"three editors typing {args.keys} keystrokes each at {args.rate:g}/s under "
                f"{module}, coalescing {window:g} ms...")
            try:
                run = run_editors(module, window, args.keys, args.rate, args.seed, args.timeout,
                                  reliable=not args.no_reliable)
            except ProcessError as error:
                raise CliError(f"{prog}: {error}") from None
            run["yjs"] = yjs_bytes(run.pop("keys"), args.seed)
            runs.append(run)
    result: dict[str, Any] = {"runs": runs}
    if args.screen is not None:
        say(f"timing keys and moves at {args.screen:,} characters...")
        result["screen"] = keystroke_times(args.screen)
    if args.fields:
        result["fields"] = {module: keystroke_fields(module) for module in modules}
    if args.json:
        print(json.dumps(result))
        return 0
    for run in runs:
        line = (f"{run['module']}{'' if run['reliable'] else ' (no reliable layer)'}, "
                f"coalescing {run['coalesce_ms']:g} ms: "
                f"{run['keystrokes']} keystrokes, {run['operations']} messages, "
                f"{run['keystrokes_per_second']} keystrokes/s, copies "
                f"{'identical' if run['identical'] else 'DIFFERENT'}; "
                f"{run['wire_bytes_per_keystroke']} B/keystroke on the wire "
                f"({run['frames']} frames of {run['bytes_per_frame']} B on average)")
        yjs = run["yjs"]
        if yjs:
            ratio = run["wire_bytes_per_keystroke"] / max(yjs["bytes_per_keystroke"], 0.1)
            line += f"; Yjs {yjs['bytes_per_keystroke']} B/keystroke (ours / Yjs {ratio:.2f})"
        print(line)
    if not any(run["yjs"] for run in runs):
        print("Yjs not measured: pycrdt is not installed")
    if "screen" in result:
        times = result["screen"]
        print(f"at {times['characters']:,} characters: a key and a drawing of the screen "
              f"{times['key_median_ms']} ms median ({times['key_p90_ms']} ms p90), a move "
              f"{times['move_median_ms']} ms median")
    for module, sizes in result.get("fields", {}).items():
        print(f"{module}, one keystroke's frame: {sizes['frame']} B = signature "
              f"{sizes['signature']} + header {sizes['frame_header']} + routed head "
              f"{sizes['routed_head']} + compressed batch {sizes['compressed_batch']}; the "
              f"batch before compression {sizes['batch']} B: " + ", ".join(
                  f"{name} {sizes[name]}" for name in (
                      "batch_head", "message_array_header", "message_id", "destinations",
                      "kind", "stamp", "tag_clock", "payload", "payload_pickled")))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    return run_main(build_parser, _run, argv)
