"""``groupcomm demo``: the end-to-end demonstration (the scenarios: docs/commands.md).
A session server and alice, bob and carol run as processes on 127.0.0.1, driven as people
would drive them; alice's messages to carol are delayed. One SparkSession analyses every
run's traces."""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import groupcomm.cli.args as cli
from groupcomm.core.registry import available_modules, get_module
from groupcomm.replicated import unsupported_reason
from groupcomm.tools.procs import LineProcess, ProcessError, ProcessGroup

PEOPLE = ("alice", "bob", "carol")
DELAY_MS = 1000
#: the shared-text scenario's delay from alice to carol: longer, because bob's reply
#: takes more steps there (see the text, move to its end, type) and must still reach
#: carol before alice's text does on a loaded machine
TEXT_DELAY_MS = 3000


@dataclass(frozen=True)
class Scenario:
    """Who types what, when; ``texts`` maps each label to the text typed."""

    name: str
    texts: dict[str, str]
    broadcast: bool
    #: "chat" (the IM) or "text" (the shared editor)
    kind: str = "chat"


MEETING = Scenario("meeting", {"m1": "Let's meet at 3pm", "m2": "Please join the meeting",
                               "m3": "What is the meeting about?"}, broadcast=False)
LUNCH = Scenario("lunch", {"m1": "Done?", "m2": "Lunch?", "m3": "Yes, No"}, broadcast=True)
SHARED_TEXT = Scenario("shared-text", {"m1": "Hello", "m2": " world", "m3": "Dear all: "},
                       broadcast=True, kind="text")
UNICAST_DEFAULTS = ("none", "fifo", "matrix", "mfss", "cykas")
BROADCAST_DEFAULTS = ("none", "vector", "matrix")
TEXT_DEFAULTS = ("none", "fifo", "vector", "matrix")


def plan_runs(causality: str) -> list[tuple[Scenario, str]]:
    """The (scenario, module) pairs to run for ``--causality`` (a name or ``all``)."""
    installed = available_modules()
    if causality == "all":
        runs = [(MEETING, m) for m in UNICAST_DEFAULTS if m in installed]
        runs += [(LUNCH, m) for m in BROADCAST_DEFAULTS if m in installed]
        runs += [(SHARED_TEXT, m) for m in TEXT_DEFAULTS if m in installed]
        return runs
    module = get_module(causality)  # raises UnknownModuleError listing what exists
    runs = [] if module.broadcast_only else [(MEETING, causality)]
    runs.append((LUNCH, causality))
    if unsupported_reason(module) is None or causality in TEXT_DEFAULTS:
        runs.append((SHARED_TEXT, causality))  # the editor refuses mfss and cykas
    return runs


#: a delivered message's line: ``bob·2 14:02 [bob] text`` (not "[you -> ...]", not held)
DELIVERED = re.compile(r"\S+ (\d\d:\d\d|--:--) \[(?!you\b)[^\],]*\] ")


def _shown(line: str, sender: str, text: str) -> bool:
    # a message to everyone shows as [alice], a private one as [alice -> you]
    return f"] {text}" in line and (f"[{sender}]" in line or f"[{sender} -> you]" in line)


def _labels(screen: Sequence[str], scenario: Scenario) -> list[str]:
    found = []
    for line in screen:
        if not DELIVERED.match(line):
            continue  # not a delivered message (own sends are shown as "[you -> ...]",
            # a held one as "[alice, held]")
        for label, text in scenario.texts.items():
            if line.split("] ", 1)[-1].startswith(text):
                found.append(label)
    return found


@dataclass
class Run:
    """One scenario under one module: processes, traces, deliveries."""

    #: the app each person runs, its delay from alice to carol and how it is left
    app = ("groupcomm.apps.im",)
    delay_ms = DELAY_MS
    quit_line = "/quit"

    scenario: Scenario
    causality: str
    workdir: Path
    trace_dir: Path
    timeout: float
    people: dict[str, LineProcess] = field(default_factory=dict)

    def _start_person(self, name: str, group: ProcessGroup) -> LineProcess:
        assert group.server is not None
        extra = ["--delay", f"carol={self.delay_ms}"] if name == "alice" else []
        person = LineProcess(name, [
            sys.executable, "-m", *self.app, "--name", name, "--session", "demo",
            "--server", group.server.address, "--key-file", str(group.key_file),
            "--causality", self.causality, "--trace-dir", str(self.trace_dir),
            # the demo compares the modules: the reliable layer's numbers and
            # acknowledgements (and its retransmissions of frames the injected delay
            # holds past its timeout) would be counted in every module's figures
            "--no-reliable", *extra])
        self.people[name] = person
        return person

    def execute(self) -> dict[str, Any]:
        """Run the scenario; returns what the table shows of it (:meth:`_outcome`)."""
        with ProcessGroup(self.workdir) as group:
            try:
                for name in PEOPLE:
                    self._start_person(name, group)
                self._await_members()
                self._play()
                self._finish()
            finally:
                for person in self.people.values():
                    person.quit(self.quit_line)
        return self._outcome()

    def _await_members(self) -> None:
        for person in self.people.values():
            person.wait_line(lambda s: "joined" in s and all(n in s for n in PEOPLE),
                             self.timeout, "all three joined")
        for name, person in self.people.items():
            # a newcomer gets the conversation so far first (state transfer); the
            # scenario starts once everyone has it
            own = person.wait_line(lambda s: "with causality" in s, self.timeout,
                                   "its own join")
            members = own.partition("(members: ")[2].partition(")")[0].split(", ")
            if any(other in members for other in PEOPLE if other != name):
                person.wait_line(lambda s: s.startswith("* up to date"), self.timeout,
                                 "the conversation so far")

    def _finish(self) -> None:
        """What is done before the people leave."""

    def _outcome(self) -> dict[str, Any]:
        """Each person's delivered labels in screen order."""
        return {"deliveries": {name: _labels(p.lines, self.scenario)
                               for name, p in self.people.items()}}

    def _play(self) -> None:
        alice, bob, carol = (self.people[n] for n in PEOPLE)
        t = self.scenario.texts
        wait = self.timeout
        if not self.scenario.broadcast:
            alice.type(f"/to carol {t['m1']}")
            alice.type(f"/to bob {t['m2']}")
            bob.wait_line(lambda s: _shown(s, "alice", t["m2"]), wait, "m2 at bob")
            bob.type(f"/to carol {t['m3']}")
            carol.wait_line(lambda s: _shown(s, "alice", t["m1"]), wait, "m1 at carol")
            carol.wait_line(lambda s: _shown(s, "bob", t["m3"]), wait, "m3 at carol")
            return
        alice.type(t["m1"])
        bob.wait_line(lambda s: _shown(s, "alice", t["m1"]), wait, "m1 at bob")
        bob.type(t["m2"])
        carol.wait_line(lambda s: _shown(s, "alice", t["m1"]), wait, "m1 at carol")
        carol.wait_line(lambda s: _shown(s, "bob", t["m2"]), wait, "m2 at carol")
        carol.type(t["m3"])
        for person in (alice, bob):
            person.wait_line(lambda s: _shown(s, "carol", t["m3"]), wait, "m3")


class TextRun(Run):
    """The shared-text scenario: three batch editors."""

    # without clock acknowledgements: they count as sends in the clocks, so how many a
    # member made before the others typed would decide which of the two concurrent
    # inserts at the start comes first, and the scenario's texts would vary
    app = ("groupcomm.apps.edit", "--batch", "--allow-divergence", "--no-clock-acks")
    delay_ms = TEXT_DELAY_MS
    quit_line = "quit"

    def _start_person(self, name: str, group: ProcessGroup) -> LineProcess:
        person = super()._start_person(name, group)
        person.wait_line(lambda s: " joined demo with causality" in s, self.timeout,
                         "its join")
        return person

    def _await_members(self) -> None:
        for person in self.people.values():
            person.type(f"wait-members 3 {self.timeout:g}")
            person.wait_line(lambda s: s.startswith("members "), self.timeout,
                             "all three joined")

    def _finish(self) -> None:
        self.finals: dict[str, Any] = {}
        for name, person in self.people.items():
            # quiet for longer than the delay: carol's copy of alice's text, held
            # in alice's delay plan, has arrived before anyone's text is read
            person.type(f"quiet {TEXT_DELAY_MS / 1000 + 1:g}")
            person.wait_line(lambda s: s == "quiet", self.timeout * 2, "quiet")
            person.type("show")
            line = person.wait_line(lambda s: s.startswith("text "), self.timeout, "show")
            self.finals[name] = json.loads(line[len("text "):])

    def _outcome(self) -> dict[str, Any]:
        """Carol's text, whether the copies are identical, how many edits failed."""
        texts = {name: final["text"] for name, final in self.finals.items()}
        return {"deliveries": {"carol": [json.dumps(texts.get("carol", ""))]},
                "texts": texts, "identical": len(set(texts.values())) == 1,
                "failed_edits": sum(final["failures"] for final in self.finals.values())}

    def _play(self) -> None:
        alice, bob, carol = (self.people[n] for n in PEOPLE)
        t = {label: json.dumps(text) for label, text in self.scenario.texts.items()}
        alice.type(f"type {t['m1']}")
        # carol types once alice's "Hello" is in alice's text: had carol's edit reached
        # alice first (carol to alice is not delayed), alice would type after it, at the
        # start, and "Hello" would come first in every copy
        alice.type(f"wait-text {t['m1']} {self.timeout:g}")
        alice.wait_line(lambda s: s.startswith("seen "), self.timeout, "Hello at alice")
        carol.type(f"type {t['m3']}")
        bob.type(f"wait-text {t['m1']} {self.timeout:g}")
        bob.wait_line(lambda s: s.startswith("seen "), self.timeout, "Hello at bob")
        bob.type("end")
        bob.type(f"type {t['m2']}")


def summarize(result: dict[str, Any], causality: str) -> dict[str, Any]:
    """The figures the demo table shows, from the analysis result."""
    per = (result.get("per_protocol") or {}).get(causality, {})
    latency = per.get("latency_ms") or result.get("latency_ms") or {}
    control = per.get("control_per_message") or {}
    return {
        "causal_violations": result.get("causal_violations"),
        "fifo_violations": result.get("fifo_violations"),
        "undelivered": result.get("undelivered"),
        "median_latency_ms": latency.get("p50"),
        "meta_bytes_per_message": per.get("meta_bytes_per_message"),
        "control_messages_per_message": sum(control.values()),
    }


def _fmt(value: Any, digits: int = 1) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def print_table(runs: list[dict[str, Any]]) -> None:
    # the module column as wide as the longest name (a plugin's can be long)
    width = max([len("causality"), *(len(run["causality"]) for run in runs)])
    header = (f"{'scenario':11} {'causality':{width}} {'carol has':24} {'same text':>9} "
              f"{'violations':>10} {'p50 ms':>8} {'meta B/msg':>10} {'ctrl/msg':>8}")
    print(header)
    print("-" * len(header))
    for run in runs:
        order = " ".join(run["deliveries"]["carol"])
        if "identical" in run:
            same = "yes" if run["identical"] else "NO"
            note = (f"  <- copies differ, {run['failed_edits']} edit(s) failed"
                    if not run["identical"] else "")
        else:
            same = "-"
            note = "  <- carol confused" if run["causal_violations"] else ""
        print(f"{run['scenario']:11} {run['causality']:{width}} {order:24} {same:>9} "
              f"{_fmt(run['causal_violations']):>10} {_fmt(run['median_latency_ms']):>8} "
              f"{_fmt(run['meta_bytes_per_message']):>10} "
              f"{_fmt(run['control_messages_per_message'], 2):>8}{note}")


def build_parser() -> cli.ArgumentParser:
    parser = cli.ArgumentParser(
        prog="groupcomm demo",
        description="Start a session server and three IM clients (alice, bob, carol) as "
        "separate processes, replay the seeds' scenarios with a delay from alice to carol, "
        "analyse the traces with PySpark and print what each module did.",
    )
    parser.add_argument("--causality", default="all",
                        help="module to demonstrate, or all (default)")
    cli.add_output_arguments(parser)
    parser.add_argument("--trace-dir", help="keep the traces here (default: a temp dir)")
    parser.add_argument("--report", metavar="DIR",
                        help="write the analysis report (plots, space-time diagrams) here")
    parser.add_argument("--master", help="Spark master URL (default local[2])")
    parser.add_argument("--timeout", type=float, default=30.0,
                        help="seconds to wait for each step (default 30)")
    cli.add_flags(parser, no_analysis="skip the Spark analysis (deliveries only)")
    return parser


@contextmanager
def stderr_into(path: Path) -> Iterator[None]:
    """Point this process's file descriptor 2 at ``path`` (appending) for the block.

    Spark's JVM, started in the block, inherits it and keeps it: its start-up lines
    and whatever it prints later (log4j before its configuration is read, the Python
    workers it starts) go to ``path`` instead of between the demo's lines. Python's
    ``sys.stderr`` is the same descriptor, so it is back after the block.
    """
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(path, "ab") as log_file:
            os.dup2(log_file.fileno(), 2)
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)


def start_spark(master: str | None, log_path: Path) -> Any:
    """The SparkSession, its JVM's output kept in ``log_path``; when Spark does not
    start, the log's last lines are shown and the error is one :class:`CliError`."""
    from trace_analysis import SparkUnavailableError, get_spark

    print(f"starting Spark (its output: {log_path})...", file=sys.stderr, flush=True)
    try:
        with stderr_into(log_path):
            return get_spark(master)
    except SparkUnavailableError as error:
        tail = log_path.read_text(errors="replace").splitlines()[-20:]
        for line in tail:
            print(f"  spark: {line}", file=sys.stderr)
        raise cli.CliError(f"groupcomm demo: {error} (Spark's output: {log_path})") from None


def _run(args: argparse.Namespace) -> int:
    cli.setup_logging(args.verbose)
    runs = cli.checked_module(plan_runs, args.causality, "groupcomm demo", warn=False)
    for causality in dict.fromkeys(module for _, module in runs):
        cli.warn_if_known_bad(get_module(causality), "groupcomm demo")
    cli.ensure_trace_dir(args.trace_dir, "groupcomm demo")
    keep = args.trace_dir is not None
    base = Path(args.trace_dir) if keep else Path(tempfile.mkdtemp(prefix="groupcomm-demo-"))
    spark = None
    results: list[dict[str, Any]] = []
    started = time.monotonic()
    # Spark's own output: with the traces when they are kept, else a temporary file
    # removed when the demo succeeds
    spark_log: Path | None = None
    if not args.no_analysis:
        if keep:  # base exists: ensure_trace_dir made it
            spark_log = base / "spark.log"
        else:
            handle, name = tempfile.mkstemp(prefix="groupcomm-demo-spark-", suffix=".log")
            os.close(handle)
            spark_log = Path(name)
    succeeded = False
    try:
        if spark_log is not None:
            spark = start_spark(args.master, spark_log)
        for index, (scenario, causality) in enumerate(runs, 1):
            label = f"{scenario.name}-{causality}"
            print(f"[{index}/{len(runs)}] {scenario.name} scenario with {causality}...",
                  file=sys.stderr, flush=True)
            trace_dir = base / label
            if trace_dir.exists():
                shutil.rmtree(trace_dir)
            row: dict[str, Any] = {"causality": causality, "scenario": scenario.name,
                                   "trace_dir": str(trace_dir)}
            kind = TextRun if scenario.kind == "text" else Run
            with tempfile.TemporaryDirectory() as workdir:
                row.update(kind(scenario, causality, Path(workdir), trace_dir,
                                args.timeout).execute())
            analysis: dict[str, Any] = {}
            if spark is not None:
                from trace_analysis import analyze

                analysis = analyze(str(trace_dir), spark=spark, report_dir=str(
                    Path(args.report) / label) if args.report else None)
            row.update(summarize(analysis, causality))
            results.append(row)
        succeeded = True
    except ProcessError as error:
        raise cli.CliError(f"groupcomm demo: {error}") from None
    finally:
        if not keep:
            shutil.rmtree(base, ignore_errors=True)
            if spark_log is not None:
                if succeeded or spark_log.stat().st_size == 0:
                    spark_log.unlink(missing_ok=True)
                else:
                    print(f"Spark's output is kept in {spark_log}", file=sys.stderr)
    elapsed = time.monotonic() - started
    if args.json:
        print(json.dumps({"runs": results, "seconds": round(elapsed, 1)}))
    else:
        print_table(results)
        print(f"\n{len(results)} runs in {elapsed:.0f} s"
              + (f"; traces in {base}" if keep else "")
              + (f"; reports in {args.report}" if args.report else ""))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    return cli.run_main(build_parser, _run, argv)
