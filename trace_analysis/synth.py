"""Synthetic traces for benchmarks and tests: :func:`generate` simulates processes
sending unicasts, multicasts and broadcasts, each delivering what is addressed to it in
sending order (a causal execution), with a few anomalies injected. Lines are formatted
as strings: ten million events take a minute, not ten."""

from __future__ import annotations

import logging
import random
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

log = logging.getLogger(__name__)

PROTOCOLS = ("none", "fifo", "vector", "matrix", "mfss", "cykas")
_FLUSH_LINES = 100_000
_TS0 = 1_790_000_000.0


@dataclass(frozen=True)
class SynthSpec:
    """What to generate; ``events`` is approximate (the run stops after the first step
    that reaches it, then lets every pending message arrive)."""

    events: int
    processes: int = 16
    protocol: str = "cykas"
    seed: int = 1
    violations: int = 5
    undelivered: int = 5
    duplicates: int = 3
    malformed: int = 3
    pad: int = 128

    def __post_init__(self) -> None:
        if self.processes < 2:
            raise ValueError("need at least 2 processes")
        if self.events < 1:
            raise ValueError("need at least one event")
        if self.pad < 0:
            raise ValueError("pad must be >= 0")
        if self.protocol not in PROTOCOLS:
            raise ValueError(f"unknown protocol {self.protocol!r}; one of {', '.join(PROTOCOLS)}")


@dataclass
class SynthResult:
    """What :func:`generate` wrote: lines, bytes, and the anomalies injected."""

    lines: int
    bytes: int
    injected: dict[str, int] = field(default_factory=dict)


def _meta_bytes(protocol: str, processes: int, eager: bool) -> int:
    """A plausible size of the protocol metadata on one application message."""
    sizes = {"fifo": 3, "vector": 1 + 3 * processes,
             "matrix": 3 + processes * (3 + 3 * processes), "cykas": int(eager)}
    return sizes.get(protocol, 0)


class _Writer:
    """Per-process line buffers, flushed in large blocks."""

    def __init__(self, directory: Path, names: list[str]) -> None:
        self.paths = [directory / f"{name}.jsonl" for name in names]
        self.handles = [open(path, "w", encoding="utf-8") for path in self.paths]  # noqa: SIM115
        self.buffers: list[list[str]] = [[] for _ in names]
        self.pending = 0
        self.lines = 0

    def add(self, index: int, line: str) -> None:
        self.buffers[index].append(line)
        self.pending += 1
        if self.pending >= _FLUSH_LINES:
            self.flush()

    def flush(self) -> None:
        for handle, buffer in zip(self.handles, self.buffers, strict=True):
            if buffer:
                handle.write("".join(buffer))
                buffer.clear()
        self.lines += self.pending
        self.pending = 0

    def close(self) -> None:
        self.flush()
        for handle in self.handles:
            handle.close()


#: how deep into a queue the violation injection looks for a pair to swap
_VIOLATION_WINDOW = 32


class _Simulation:
    """The sequential execution; one instance per :func:`generate` call."""

    def __init__(self, spec: SynthSpec, writer: _Writer, names: list[str]) -> None:
        self.spec = spec
        self.out = writer
        self.names = names
        self.n = len(names)
        self.rng = random.Random(spec.seed)
        self.t = _TS0
        self.vc = [[0] * self.n for _ in names]
        self.next_id = [0] * self.n
        self.queues: list[deque[tuple]] = [deque() for _ in names]
        self.vc_format = "{" + ",".join(f'"{name}":%d' for name in names) + "}"
        self.head = [f'"process":"{name}","event":' for name in names]
        # extra fields may appear in traces (the analyzer ignores them); the padding
        # field makes the line sizes of the performance target (~340 bytes per event)
        filler = "abcdefghijklmnopqrstuvwxyz0123456789" * (spec.pad // 36 + 1)
        pad = f',"detail":"{filler[:max(0, spec.pad - 12)]}"' if spec.pad >= 12 else ""
        self.proto = f'"protocol":"{spec.protocol}"{pad}'
        self.acks = spec.protocol in ("mfss", "cykas")
        self.injected = {"violations": 0, "undelivered": 0, "duplicates": 0, "malformed": 0}

    def _tick(self) -> float:
        self.t += self.rng.random() * 0.0001
        return self.t

    def _line(self, p: int, event: str, msg: str, sender: str, rest: str = "",
              ts: float | None = None) -> None:
        """Write one line of ``p``'s trace (at the next tick unless ``ts`` is given)."""
        ts = self._tick() if ts is None else ts
        self.out.add(p, f'{{"ts":{ts:.7f},{self.head[p]}"{event}",{self.proto},"msg":"{msg}",'
                        f'"sender":"{sender}"{rest}}}\n')

    def send(self, p: int) -> None:
        rng, n, names = self.rng, self.n, self.names
        shape = rng.random()
        if shape < 0.5:
            dests = [rng.randrange(n - 1)]
            if dests[0] >= p:
                dests[0] += 1
        elif shape < 0.8:
            dests = rng.sample([i for i in range(n) if i != p], rng.randint(2, max(2, n - 2)))
            dests.sort()
        else:
            dests = [i for i in range(n) if i != p or shape > 0.9]
        self.next_id[p] += 1
        msg = f"{names[p]}#{self.next_id[p]}"
        clock = self.vc[p]
        clock[p] += 1
        snapshot = tuple(clock)
        ts = self._tick()
        eager = self.spec.protocol == "cykas" and rng.random() < 0.2
        kind = "eager" if eager else "normal"
        size = _meta_bytes(self.spec.protocol, n, eager)
        dests_json = ",".join(f'"{names[d]}"' for d in dests)
        self._line(p, "send", msg, names[p],
                   f',"dests":[{dests_json}],"vc":{self.vc_format % snapshot}', ts)
        for d in dests:
            self._line(p, "network_send", msg, names[p],
                       f',"kind":"{kind}","meta_bytes":{size},"to":"{names[d]}"')
            self.queues[d].append((msg, p, snapshot, kind))

    def deliver(self, p: int, message: tuple, twice: bool = False) -> None:
        msg, s, snapshot, kind = message
        rng = self.rng
        sender = self.names[s]
        self._line(p, "receive", msg, sender, f',"kind":"{kind}"')
        if rng.random() < 0.1:
            self._line(p, "buffer", msg, sender, ts=self.t)
            self.t += rng.random() * 0.005
            self._line(p, "unbuffer", msg, sender)
        clock = self.vc[p]
        for _ in range(2 if twice else 1):
            for k, value in enumerate(snapshot):
                if value > clock[k]:
                    clock[k] = value
            clock[p] += 1
            self._line(p, "deliver", msg, sender, f',"vc":{self.vc_format % tuple(clock)}')
        if self.acks:
            self._control(p, s, "ack", msg)
            if kind == "eager":
                self._control(s, p, "yct", msg)

    def _control(self, src: int, dst: int, kind: str, about: str) -> None:
        self.next_id[src] += 1
        cid = f"{self.names[src]}#{self.next_id[src]}"
        src_name, dst_name = self.names[src], self.names[dst]
        self._line(src, "control_send", cid, src_name,
                   f',"kind":"{kind}","meta_bytes":12,"to":"{dst_name}","about":"{about}"')
        self._line(dst, "control_receive", cid, src_name, f',"kind":"{kind}","about":"{about}"')

    def _anomaly(self, p: int, which: str) -> bool:
        """Inject one anomaly at ``p`` if its queue allows; True when done."""
        queue = self.queues[p]
        if which == "violations":
            early = self._one_cause_message(queue)
            if early is None:
                return False
            message = queue[early]
            del queue[early]
            self.deliver(p, message)
            return True
        if not queue:
            return False
        if which == "undelivered":
            queue.popleft()
            return True
        self.deliver(p, queue.popleft(), twice=True)
        return True

    @staticmethod
    def _one_cause_message(queue: deque[tuple]) -> int | None:
        """The position, among the first :data:`_VIOLATION_WINDOW`, of a queued message
        that exactly one message queued before it happened before, or None: delivering
        it first makes exactly one causal violation (a queue is in sending order)."""
        window = min(len(queue), _VIOLATION_WINDOW)
        for j in range(1, window):
            later = queue[j][2]
            causes = 0
            for k in range(j):
                sender = queue[k][1]
                if queue[k][2][sender] <= later[sender]:
                    causes += 1
                    if causes > 1:
                        break
            if causes == 1:
                return j
        return None

    def _malformed(self) -> None:
        samples = (
            "this is not JSON\n",
            '{"ts":%(ts).7f,"process":"%(p)s","protocol":"%(protocol)s"}\n',
            '{"ts":"late","process":"%(p)s","event":"send","protocol":"%(protocol)s"}\n',
            '{"ts":%(ts).7f,"process":"%(p)s","event":"deliver","protocol":"%(protocol)s",'
            '"msg":7,"sender":"x","vc":{}}\n',
        )
        for count in range(self.spec.malformed):
            p = self.rng.randrange(self.n)
            fields = {"ts": self.t, "p": self.names[p], "protocol": self.spec.protocol}
            self.out.add(p, samples[count % len(samples)] % fields)
            self.injected["malformed"] += 1

    def run(self) -> None:
        spec, rng, n, queues = self.spec, self.rng, self.n, self.queues
        target = spec.events
        plan: list[tuple[int, str]] = []
        for which in ("violations", "undelivered", "duplicates"):
            plan += [(rng.randrange(max(1, target)), which)
                     for _ in range(getattr(spec, which))]
        plan.sort(reverse=True)
        malformed_at = rng.randrange(max(1, target))
        while self.out.lines + self.out.pending < target:
            written = self.out.lines + self.out.pending
            if malformed_at is not None and written >= malformed_at:
                self._malformed()
                malformed_at = None
            p = rng.randrange(n)
            queue = queues[p]
            if queue and rng.random() < 0.9:
                # a due anomaly that this queue cannot take waits for another step: the
                # delivery goes ahead, so the run always progresses toward its size
                if plan and written >= plan[-1][0] and self._anomaly(p, plan[-1][1]):
                    self.injected[plan.pop()[1]] += 1
                    continue
                self.deliver(p, queue.popleft())
            else:
                self.send(p)
        if malformed_at is not None:
            self._malformed()
        for p in range(n):  # let every pending message arrive
            while queues[p]:
                if plan and self._anomaly(p, plan[-1][1]):
                    self.injected[plan.pop()[1]] += 1
                    continue
                self.deliver(p, queues[p].popleft())


def generate(spec: SynthSpec, directory: str | Path) -> SynthResult:
    """Write a synthetic trace directory for ``spec`` (files are overwritten); raises
    ``OSError`` when the directory cannot be written."""
    out_dir = Path(directory)
    out_dir.mkdir(parents=True, exist_ok=True)
    width = max(2, len(str(spec.processes - 1)))  # proc-00...: files sort in process order
    names = [f"proc-{i:0{width}d}" for i in range(spec.processes)]
    writer = _Writer(out_dir, names)
    simulation = _Simulation(spec, writer, names)
    try:
        simulation.run()
    finally:
        writer.close()
    size = sum(path.stat().st_size for path in writer.paths)
    log.info("wrote %d lines (%d bytes) in %s", writer.lines, size, out_dir)
    return SynthResult(writer.lines, size, dict(simulation.injected))
