"""``groupcomm text-bench --trace``: a recorded editing session replayed into the text and
into pycrdt, each in a subprocess of its own (BENCHMARKS.md, "A real editing trace")."""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import gc
import gzip
import json
import multiprocessing
import pickle
import random
import resource
import sys
import time
from array import array
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgpack

from groupcomm.cli.args import CliError
from groupcomm.core.messages import Tag
from groupcomm.replicated import Stability, TextSequence
from groupcomm.replicated.editor import COLLECT_EVERY

TRACE_HELP = (
    "replay an editing trace in the sequential_traces format of the editing-traces "
    "repository (github.com/josephg/editing-traces: {startContent, endContent, txns: "
    "[{patches: [[position, deleted, inserted], ...]}]}, plain or gzip), e.g. "
    "sequential_traces/automerge-paper.json.gz from that repository (nothing is "
    "downloaded); then only the trace is measured. A trace in its concurrent_traces "
    "format (txns with parents and agent, e.g. clownschool.json.gz) is replayed into one "
    "replica per agent, without collection and collecting every --collect-every "
    "operations (default 64, 0: never), each replica's final text checked")
#: edits at the start and at the end of a trace whose cost per edit is compared
WINDOW = 10_000
AUTHOR = "u"


def say(text: str) -> None:
    """Progress, on stderr (the results go to stdout)."""
    print(text, file=sys.stderr, flush=True)


class Trace:
    """A trace's edits, compactly: positions, counts deleted and inserted, and all
    inserted text as one string."""

    def __init__(self, name: str, start: str, end: str) -> None:
        self.name = name
        self.start = start
        self.end = end
        self.positions = array("q")
        self.deleted = array("q")
        self.inserted = array("q")
        self.text = ""

    def __len__(self) -> int:
        return len(self.positions)

    def edits(self):
        at = 0
        text = self.text
        for position, deleted, inserted in zip(self.positions, self.deleted,
                                               self.inserted, strict=True):
            yield position, deleted, text[at:at + inserted]
            at += inserted


def load_trace(path: str) -> Any:
    """A trace file's JSON (plain or gzip); ``CliError`` saying what is wrong."""
    prog = "groupcomm text-bench"
    try:
        raw = Path(path).read_bytes()
    except OSError as error:
        raise CliError(f"{prog}: cannot read the trace {path}: {error.strerror}") from None
    try:
        if raw[:2] == b"\x1f\x8b":
            raw = gzip.decompress(raw)
        data = json.loads(raw)
    except (OSError, EOFError, ValueError) as error:
        raise CliError(f"{prog}: {path} is not a (gzipped) JSON trace: {error}") from None
    return data


def check_patch(prog: str, path: str, number: int, patch: object) -> None:
    """Refuse, in one line, a patch that is not [position, deleted, inserted text]
    changing something (both trace formats share it)."""
    if (not isinstance(patch, list) or len(patch) != 3
            or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0
                       for v in patch[:2]) or not isinstance(patch[2], str)
            or not (patch[1] or patch[2])):
        raise CliError(f"{prog}: {path}: transaction {number}: a patch is "
                       f"[position >= 0, deleted >= 0, inserted text] that changes "
                       f"something, got {patch!r:.80}")


def read_trace(path: str, data: Any = None) -> Trace:
    prog = "groupcomm text-bench"
    if data is None:
        data = load_trace(path)
    if not isinstance(data, dict) or not {"endContent", "txns"} <= set(data):
        raise CliError(f"{prog}: {path}: expected an object with endContent and txns (the "
                       "sequential_traces format)")
    start, end, txns = data.get("startContent", ""), data["endContent"], data["txns"]
    if not isinstance(start, str) or not isinstance(end, str) or not isinstance(txns, list):
        raise CliError(f"{prog}: {path}: startContent and endContent are strings, txns a list")
    trace = Trace(Path(path).name, start, end)
    parts: list[str] = []
    for number, txn in enumerate(txns):
        patches = txn.get("patches") if isinstance(txn, dict) else None
        if not isinstance(patches, list):
            raise CliError(f"{prog}: {path}: transaction {number} has no list of patches")
        for patch in patches:
            check_patch(prog, path, number, patch)
            trace.positions.append(patch[0])
            trace.deleted.append(patch[1])
            trace.inserted.append(len(patch[2]))
            parts.append(patch[2])
    trace.text = "".join(parts)
    if not len(trace):
        raise CliError(f"{prog}: {path}: the trace has no edits")
    return trace


class _GroupcommReplay:
    """The text as the editor uses it: every edit an operation with its own id and tag,
    collected every :data:`COLLECT_EVERY` operations unless told not to."""

    def __init__(self, start: str, collect: bool) -> None:
        self.text = TextSequence()
        self.stability = Stability(AUTHOR, [AUTHOR])
        self.collect = collect
        self.sent = 0
        if start:
            self._apply(self.text.prepare_insert(0, start))

    def _apply(self, op: Any) -> None:
        self.sent += 1
        tag = Tag({AUTHOR: self.sent})
        self.text.effect(op, tag, f"{AUTHOR}#{self.sent}", AUTHOR)
        self.stability.delivered(AUTHOR, tag)
        if self.collect and self.sent % COLLECT_EVERY == 0:
            self.text.collect(self.stability)

    def edit(self, position: int, deleted: int, inserted: str) -> None:
        if deleted:
            self._apply(self.text.prepare_delete(position, deleted))
        if inserted:
            self._apply(self.text.prepare_insert(position, inserted))

    def value(self) -> str:
        return self.text.value


class _PycrdtReplay:
    def __init__(self, start: str, collect: bool) -> None:
        import pycrdt

        self.doc = pycrdt.Doc()
        self.text = self.doc.get("text", type=pycrdt.Text)
        if start:
            self.text.insert(0, start)

    def edit(self, position: int, deleted: int, inserted: str) -> None:
        if deleted:
            del self.text[position:position + deleted]
        if inserted:
            self.text.insert(position, inserted)

    def value(self) -> str:
        return str(self.text)


REPLAYS = {"groupcomm": _GroupcommReplay, "pycrdt": _PycrdtReplay}


def reset_peak_memory() -> int:
    """Measure the peak resident set size from now (through /proc on Linux; elsewhere
    the peak so far stays); returns the resident set size now. Peak RSS, as tracemalloc
    would not see pycrdt's Rust allocations."""
    gc.collect()
    # memory freed before goes back to the system, so that neither replay is measured in
    # pages it found already mapped
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return _proc_status("VmRSS")
    except OSError:
        return peak_memory()


def _proc_status(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise OSError(f"no {field} in /proc/self/status")


def peak_memory() -> int:
    """The peak resident set size (since :func:`reset_peak_memory` where /proc has it)."""
    try:
        return _proc_status("VmHWM")
    except OSError:
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return peak if sys.platform == "darwin" else peak * 1024


def replay_in_child(kind: str, trace: Trace, collect: bool, channel: Any) -> None:
    """A subprocess: replay ``trace`` into ``kind``; progress, then the result or the
    error, go through ``channel``."""
    try:
        replica = REPLAYS[kind](trace.start, collect)
        window = min(WINDOW, max(1, len(trace) // 4))
        marks: dict[int, float] = {}
        wanted = {window, len(trace) - window}
        before = reset_peak_memory()
        started = time.process_time()
        for done, (position, deleted, inserted) in enumerate(trace.edits()):
            if done in wanted:
                marks[done] = time.process_time()
            replica.edit(position, deleted, inserted)
            if done % 20_000 == 19_999:
                channel.send(("progress", done + 1))
        ended = time.process_time()
        peak = peak_memory() - before
        final = replica.value()
        result = {"edits": len(trace), "cpu_seconds": round(ended - started, 3),
                  "window": window,
                  "first_us_per_edit": round((marks[window] - started) / window * 1e6, 2),
                  "last_us_per_edit": round(
                      (ended - marks[len(trace) - window]) / window * 1e6, 2),
                  "peak_memory_bytes": peak, "characters": len(final),
                  "exact": final == trace.end}
        if not result["exact"]:
            first = next((k for k, (a, b) in enumerate(zip(final, trace.end, strict=False))
                          if a != b), min(len(final), len(trace.end)))
            result["first_difference"] = first
        if kind == "groupcomm":
            result.update(_snapshot_figures(replica.text, replica.sent))
        channel.send(("result", result))
    except Exception as error:  # noqa: BLE001 - said to the parent, which reports it
        channel.send(("error", f"{type(error).__name__}: {error}"))


def _snapshot_figures(text: TextSequence, sent: int) -> dict[str, Any]:
    """The newcomer's state (runs, bytes, time to load) and what collection costs at
    this size (``sent``: the operations the text has seen)."""
    state = text.state()
    packed = msgpack.packb(state)
    pickled = pickle.dumps(state, pickle.HIGHEST_PROTOCOL)
    started = time.perf_counter()
    TextSequence.from_state(msgpack.unpackb(packed))
    loaded = time.perf_counter() - started
    # the most one collect can scan: no insert known stable yet, every delete stable
    unsettled = []
    for row in state["runs"]:
        op, start, chars, inserted, deleted = row[:5]
        first = int(op.rpartition("#")[2])
        if len(row) == 6:  # a chain: one insert per character, ids counting up
            unsettled += [[f"{AUTHOR}#{first + k}", 0, char, {AUTHOR: first + k}, deleted]
                          for k, char in enumerate(chars)]
        else:
            unsettled.append([op, start, chars, inserted or {AUTHOR: first}, deleted])
    fresh = TextSequence.from_state({"version": state["version"], "runs": unsettled})
    stability = Stability(AUTHOR, [AUTHOR])
    stability.delivered(AUTHOR, Tag({AUTHOR: sent}))
    started = time.perf_counter()
    fresh.collect(stability)
    full = time.perf_counter() - started
    # the editor's rhythm: 64 keystrokes, then collect
    rng = random.Random(1)
    rounds, spent = 20, 0.0
    for _ in range(rounds):
        for _ in range(COLLECT_EVERY):
            sent += 1
            op = fresh.prepare_insert(rng.randint(0, fresh.visible_length()), "x")
            tag = Tag({AUTHOR: sent})
            fresh.effect(op, tag, f"{AUTHOR}#{sent}", AUTHOR)
            stability.delivered(AUTHOR, tag)
        started = time.perf_counter()
        fresh.collect(stability)
        spent += time.perf_counter() - started
    return {"snapshot_runs": len(state["runs"]), "snapshot_msgpack_bytes": len(packed),
            "snapshot_pickle_bytes": len(pickled),
            "snapshot_load_ms": round(loaded * 1000, 1),
            "collect_everything_ms": round(full * 1000, 1),
            "collect_after_64_edits_us": round(spent / rounds * 1e6, 1),
            "kept_characters": len(text)}


def run_in_child(target: Callable[..., None], args: tuple[Any, ...], name: str,
                 timeout: float, progress: Callable[[Any], None] | None = None) -> Any:
    """Run ``target(*args, channel)`` in a subprocess of its own (spawned, reaped also on
    failure): ``progress`` hears what it sends as ``("progress", ...)``; returns what it
    sends as its result. Its error, its end without a result, or no result within
    ``timeout`` seconds is a :class:`CliError` naming it (``name``: "the pycrdt replay")."""
    context = multiprocessing.get_context("spawn")
    receiving, sending = context.Pipe(duplex=False)
    child = context.Process(target=target, args=(*args, sending), daemon=True)
    child.start()
    sending.close()
    deadline = time.monotonic() + timeout
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not receiving.poll(left):
                raise CliError(f"groupcomm text-bench: {name} took more than {timeout:g} s "
                               "(--timeout)")
            try:
                what, content = receiving.recv()
            except EOFError:
                raise CliError(f"groupcomm text-bench: {name} ended without a result (exit "
                               f"code {child.exitcode})") from None
            if what == "error":
                raise CliError(f"groupcomm text-bench: {name} failed: {content}")
            if what != "progress":
                return content
            if progress is not None:
                progress(content)
    finally:
        child.join(5)
        if child.is_alive():
            child.kill()
            child.join()
        receiving.close()


def replay_trace(trace: Trace, kinds: list[str], collect: bool,
                 timeout: float) -> dict[str, dict[str, Any]]:
    """Replay ``trace`` into each of ``kinds``, one subprocess after the other."""
    return {kind: run_in_child(
        replay_in_child, (kind, trace, collect), f"the {kind} replay", timeout,
        lambda done, kind=kind: say(f"{kind}: {done:,} of {len(trace):,} edits"))
        for kind in kinds}


def why_not_pycrdt(trace: Trace) -> str | None:
    try:
        import pycrdt  # noqa: F401
    except ImportError:
        return "pycrdt is not installed (pip install pycrdt)"
    if not (trace.text.isascii() and trace.start.isascii()):
        # the trace counts code points; pycrdt's text counts UTF-8 bytes
        return ("pycrdt indexes its text in UTF-8 bytes and this trace has non-ASCII "
                "text (its positions count code points): take the trace's ascii_only "
                "variant to compare")
    return None


def _ratio(ours: float, theirs: float) -> str:
    return f"{ours / theirs:.2f}x" if theirs else "-"


def print_trace_table(trace: Trace, results: dict[str, dict[str, Any]],
                      collect: bool, skipped: str | None) -> None:
    ours = results["groupcomm"]
    theirs = results.get("pycrdt")
    window = ours["window"]
    print(f"trace {trace.name}: {len(trace):,} edits, final text {len(trace.end):,} "
          f"characters; groupcomm {'collecting every 64 operations as the editor does' if collect else 'keeping every tombstone and tag (--no-collect)'}")
    print("final text: " + ", ".join(
        f"{name} " + ("exact" if r["exact"] else
                      f"DIFFERENT from character {r['first_difference']:,}")
        for name, r in results.items()))
    rows = []
    for label, key, scale, form in (
            ("CPU time (s)", "cpu_seconds", 1, ".2f"),
            (f"per edit, first {window:,} (us)", "first_us_per_edit", 1, ".1f"),
            (f"per edit, last {window:,} (us)", "last_us_per_edit", 1, ".1f"),
            ("peak memory (MB, max RSS)", "peak_memory_bytes", 1e6, ".1f")):
        row = [label, format(ours[key] / scale, form)]
        if theirs:
            row += [format(theirs[key] / scale, form), _ratio(ours[key], theirs[key])]
        rows.append(row)
    growth = ["last / first", _ratio(ours["last_us_per_edit"], ours["first_us_per_edit"])]
    if theirs:
        growth += [_ratio(theirs["last_us_per_edit"], theirs["first_us_per_edit"]), ""]
    rows.insert(3, growth)
    header = ("", "groupcomm", "pycrdt", "ratio") if theirs else ("", "groupcomm")
    widths = [30, 14, 14, 8]
    for row in [header, *rows]:
        print("".join(str(cell).ljust(width) if k == 0 else str(cell).rjust(width)
                      for k, (cell, width) in enumerate(zip(row, widths, strict=False))))
    if not theirs:
        print(f"no comparison: {skipped}")
    print(f"snapshot of the final text: {ours['snapshot_runs']:,} runs, "
          f"{ours['snapshot_msgpack_bytes']:,} bytes msgpack, "
          f"{ours['snapshot_pickle_bytes']:,} bytes pickled (the wire's payload codec); "
          f"a replica built from it in {ours['snapshot_load_ms']} ms")
    print(f"collect at {ours['characters']:,} characters: {ours['collect_after_64_edits_us']}"
          f" us after 64 edits (the editor's rhythm); {ours['collect_everything_ms']} ms "
          f"when every insert of the text is new to it")


def run_trace(args: argparse.Namespace, data: Any) -> int:
    """``text-bench --trace`` on a sequential trace (``data``: its JSON)."""
    trace = read_trace(args.trace, data)
    skipped = why_not_pycrdt(trace)
    kinds = ["groupcomm", *(["pycrdt"] if skipped is None else [])]
    if skipped:
        say(f"groupcomm text-bench: no pycrdt replay: {skipped}")
    timeout = args.timeout or 1800.0
    say(f"replaying {len(trace):,} edits of {trace.name} into {' and '.join(kinds)}...")
    results = replay_trace(trace, kinds, not args.no_collect, timeout)
    if args.json:
        print(json.dumps({"trace": trace.name, "edits": len(trace),
                          "collect": not args.no_collect, "pycrdt_skipped": skipped,
                          **results}))
    else:
        print_trace_table(trace, results, not args.no_collect, skipped)
    return 0 if all(r["exact"] for r in results.values()) else 1
