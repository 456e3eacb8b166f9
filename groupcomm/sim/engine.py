"""The discrete-event engine: whole clients in virtual time.

Every simulated process is a real :class:`~groupcomm.protocol.client.ClientProtocol`
hosted in process (:mod:`groupcomm.sim.stack`); the engine supplies a clock that reads
virtual time and plays the application (:mod:`groupcomm.sim.workload`) and the network
around it: per-process NICs of limited bandwidth, links with propagation delay, long
jobs. The model and the metrics are described in docs/sim_results.md (the model). The
matrix module is too slow in Python at hundreds of processes:
:mod:`groupcomm.sim.matrix_model` is an exact vectorised model of it, used when
``engine="auto"`` picks it.
"""

from __future__ import annotations

import heapq
import logging
import random
import time
from collections import deque
from dataclasses import asdict, dataclass, field
from typing import Any

from groupcomm.core.oracle import Verdict, check_records
from groupcomm.core.tracing import MemoryTracer, NullTracer, Tracer
from groupcomm.sim.matrix_model import MatrixModelStack
from groupcomm.sim.stack import Frame, RealStack, SimulationError, Stack
from groupcomm.sim.workload import PlannedSend, Workload, random_workload

log = logging.getLogger(__name__)

DEFAULT_HEADER_BYTES = 64
DEFAULT_PAYLOAD_BYTES = 64
#: above this many processes ``engine="auto"`` runs matrix on the vectorised model
MODEL_THRESHOLD = 50
ENGINES = ("auto", "real", "model")

_SEND_DUE, _NIC_DONE, _ARRIVE, _JOB_END = range(4)


@dataclass(frozen=True)
class SimConfig:
    """Parameters of one run (their meaning: docs/sim_results.md, the model)."""

    protocol: str = "cykas"
    processes: int = 10
    bandwidth_kbps: float = 50.0
    delay_ms: float = 5.0
    #: extra propagation delay per frame, uniform in [0, jitter_ms) (breaks link FIFO)
    jitter_ms: float = 0.0
    messages_per_process: int = 100
    interval_ms: float = 10.0
    job_fraction: float = 0.0
    job_ms: float = 0.0
    job_sd_ms: float = 0.0
    hotspot_share: float = 0.0
    hotspot_weight: float = 0.8
    broadcast: bool = False
    payload_bytes: int = DEFAULT_PAYLOAD_BYTES
    header_bytes: int = DEFAULT_HEADER_BYTES
    seed: int = 0
    engine: str = "auto"

    def validate(self) -> None:
        """Raise :class:`SimulationError` naming the first bad parameter."""
        if self.bandwidth_kbps <= 0:
            raise SimulationError("bandwidth must be positive")
        for name in ("delay_ms", "jitter_ms", "interval_ms", "job_ms", "job_sd_ms"):
            if getattr(self, name) < 0:
                raise SimulationError(f"{name} must be >= 0")
        if self.payload_bytes < 0 or self.header_bytes < 0:
            raise SimulationError("payload and header sizes must be >= 0")
        if self.engine not in ENGINES:
            raise SimulationError(f"engine must be one of {', '.join(ENGINES)}")

    def workload(self) -> Workload:
        """The random workload this configuration describes."""
        return random_workload(
            self.processes, self.messages_per_process, seed=self.seed,
            job_fraction=self.job_fraction, job_ms=self.job_ms, job_sd_ms=self.job_sd_ms,
            hotspot_share=self.hotspot_share, hotspot_weight=self.hotspot_weight,
            broadcast=self.broadcast,
        )


@dataclass
class SimResult:
    """What one run measured."""

    protocol: str
    engine: str
    processes: int
    execution_time_ms: float
    avg_job_start_ms: float
    jobs: int
    app_sends: int
    app_messages: int
    control_messages: int
    meta_bytes_total: int
    wire_bytes_total: int
    deliveries: int
    eager_messages: int
    events: int
    wall_s: float
    #: messages still held by a module or unsent plans at the end (0 when live)
    stuck: int
    verdict: dict[str, int] | None = None

    @property
    def messages_per_s(self) -> float:
        """Simulated application frames per second of wall time."""
        return self.app_messages / self.wall_s if self.wall_s > 0 else 0.0

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["messages_per_s"] = round(self.messages_per_s, 1)
        data["execution_time_ms"] = round(self.execution_time_ms, 6)
        data["avg_job_start_ms"] = round(self.avg_job_start_ms, 6)
        data["wall_s"] = round(self.wall_s, 3)
        if self.verdict is None:
            data.pop("verdict")
        return data


@dataclass(slots=True, eq=False)
class _Proc:
    """One process's application and NIC."""

    plan: deque[PlannedSend]
    next_due: float = 0.0
    due_event: float | None = None
    delivered: set[str] = field(default_factory=set)
    jobs: deque[float] = field(default_factory=deque)
    job_running: bool = False
    nic: deque[Frame] = field(default_factory=deque)
    nic_busy: bool = False


class Simulation:
    """One run: build it, then :meth:`run` it once."""

    def __init__(self, config: SimConfig, workload: Workload | None = None, *,
                 trace: bool = False) -> None:
        config.validate()
        self.config = config
        self.workload = workload if workload is not None else config.workload()
        self.names = list(self.workload.processes)
        self.now = 0.0
        self._heap: list[tuple[float, int, int, Any]] = []
        self._seq = 0
        self.tracer: Tracer = MemoryTracer() if trace else NullTracer()
        self._byte_rate = config.bandwidth_kbps * 1000.0
        self._delay = config.delay_ms / 1000.0
        self._interval = config.interval_ms / 1000.0
        self._links = {pair: ms / 1000.0 for pair, ms in self.workload.link_delays.items()}
        self._jitter = config.jitter_ms / 1000.0
        self._jitter_rng = random.Random(config.seed * 1_000_003 + 17)
        self.procs = {n: _Proc(deque(self.workload.sends.get(n, []))) for n in self.names}
        self.app_sends = 0
        self.app_messages = 0
        self.control_messages = 0
        self.meta_bytes_total = 0
        self.wire_bytes_total = 0
        self.deliveries = 0
        self.eager_messages = 0
        self.job_starts: list[float] = []
        self.last_activity = 0.0
        self.engine = self._choose_engine()
        self.stack: Stack = (MatrixModelStack(self) if self.engine == "model"
                             else RealStack(self))
        self._ran = False

    def _choose_engine(self) -> str:
        wanted = self.config.engine
        if wanted == "model" and self.config.protocol != "matrix":
            raise SimulationError("the vectorised model exists for the matrix protocol only")
        if wanted == "auto":
            big = len(self.names) > MODEL_THRESHOLD
            return "model" if self.config.protocol == "matrix" and big else "real"
        return wanted

    # -- event plumbing ---------------------------------------------------------------------
    def _push(self, when: float, kind: int, arg: Any) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (when, self._seq, kind, arg))

    def transmit(self, source: str, dest: str, item: Any, size: int, meta: int,
                 control: bool, eager: bool = False) -> None:
        """Queue a frame at ``source``'s NIC (called by the stack)."""
        if control:
            self.control_messages += 1
        else:
            self.app_messages += 1
            if eager:
                self.eager_messages += 1
        self.meta_bytes_total += meta
        self.wire_bytes_total += size
        proc = self.procs[source]
        proc.nic.append(Frame(source, dest, item, size))
        if not proc.nic_busy:
            proc.nic_busy = True
            self._push(self.now + size / self._byte_rate, _NIC_DONE, proc)

    def delivered(self, name: str, payload: Any) -> None:
        """The application of ``name`` got a message (called by the stack)."""
        self.deliveries += 1
        proc = self.procs[name]
        key, job_ms = payload
        proc.delivered.add(key)
        if job_ms > 0:
            proc.jobs.append(job_ms / 1000.0)
            if not proc.job_running:
                self._start_job(proc)
        elif proc.plan and proc.plan[0].after:
            self._wake(proc)

    def _start_job(self, proc: _Proc) -> None:
        duration = proc.jobs.popleft()
        proc.job_running = True
        self.job_starts.append(self.now)
        self._push(self.now + duration, _JOB_END, proc)

    def _wake(self, proc: _Proc) -> None:
        """Make the due application sends of ``proc`` (if no job runs)."""
        while proc.plan and not proc.job_running:
            head = proc.plan[0]
            due = max(proc.next_due, head.at_ms / 1000.0)
            if self.now < due:
                if proc.due_event != due:
                    proc.due_event = due
                    self._push(due, _SEND_DUE, proc)
                return
            if head.after and not all(k in proc.delivered for k in head.after):
                return
            proc.plan.popleft()
            self.app_sends += 1
            self.last_activity = self.now
            proc.next_due = self.now + self._interval
            self.stack.app_send(head)

    # -- running ----------------------------------------------------------------------------
    def run(self) -> SimResult:
        """Run until nothing is left to happen; returns the measurements."""
        if self._ran:
            raise SimulationError("a Simulation runs once; build a new one")
        self._ran = True
        started = time.perf_counter()
        for name in self.names:
            self._push(0.0, _SEND_DUE, self.procs[name])
        heap = self._heap
        pop = heapq.heappop
        delay = self._delay
        links = self._links
        jitter = self._jitter
        jitter_rng = self._jitter_rng
        events = 0
        while heap:
            when, _, kind, arg = pop(heap)
            self.now = when
            events += 1
            if kind == _ARRIVE:
                self.last_activity = when
                self.stack.arrive(arg)
            elif kind == _NIC_DONE:
                frame = arg.nic.popleft()
                travel = links.get((frame.source, frame.dest), delay) if links else delay
                if jitter:
                    travel += jitter_rng.random() * jitter
                self._push(when + travel, _ARRIVE, frame)
                if arg.nic:
                    self._push(when + arg.nic[0].size / self._byte_rate, _NIC_DONE, arg)
                else:
                    arg.nic_busy = False
            elif kind == _SEND_DUE:
                if arg.due_event == when:
                    arg.due_event = None
                self._wake(arg)
            else:  # _JOB_END
                self.last_activity = when
                arg.job_running = False
                if arg.jobs:
                    self._start_job(arg)
                else:
                    self._wake(arg)
        wall = time.perf_counter() - started
        unsent = sum(len(p.plan) for p in self.procs.values())
        stuck = unsent + self.stack.held()
        if stuck:
            log.warning("%s: run ended with %d unsent planned send(s) and %d held message(s)",
                        self.config.protocol, unsent, stuck - unsent)
        verdict = None
        if isinstance(self.tracer, MemoryTracer):
            verdict = self.check().as_dict()
        starts = self.job_starts
        return SimResult(
            protocol=self.config.protocol,
            engine=self.engine,
            processes=len(self.names),
            execution_time_ms=self.last_activity * 1000.0,
            avg_job_start_ms=(sum(starts) / len(starts) * 1000.0) if starts else 0.0,
            jobs=len(starts),
            app_sends=self.app_sends,
            app_messages=self.app_messages,
            control_messages=self.control_messages,
            meta_bytes_total=self.meta_bytes_total,
            wire_bytes_total=self.wire_bytes_total,
            deliveries=self.deliveries,
            eager_messages=self.eager_messages,
            events=events,
            wall_s=wall,
            stuck=stuck,
            verdict=verdict,
        )

    # -- traces -----------------------------------------------------------------------------
    @property
    def records(self) -> list[dict[str, Any]]:
        """Trace records (empty unless built with ``trace=True``)."""
        return self.tracer.records if isinstance(self.tracer, MemoryTracer) else []

    def check(self) -> Verdict:
        """The oracle's verdict on this run's trace (needs ``trace=True``)."""
        return check_records(self.records)

    def write_traces(self, trace_dir: str) -> None:
        """Write the trace as ``<process>.jsonl`` files (needs ``trace=True``)."""
        if isinstance(self.tracer, MemoryTracer):
            self.tracer.write_dir(trace_dir)


def simulate(config: SimConfig, workload: Workload | None = None, *,
             trace: bool = False) -> tuple[SimResult, Simulation]:
    """Build and run one simulation; returns the result and the run (for its trace)."""
    sim = Simulation(config, workload, trace=trace)
    return sim.run(), sim
