"""What a search found (:class:`CheckResult`) and its counterexample: the steps as
text, a replay that completes a causal violation with the overtaken delivery, and the
trace files ``groupcomm analyze`` reads."""

from __future__ import annotations

import os
from collections import deque
from copy import copy
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from groupcomm.check.churn import ChurnModel, build_model
from groupcomm.check.config import CheckConfig
from groupcomm.check.model import Model
from groupcomm.check.notices import is_notice, notice_text
from groupcomm.check.state import Violation, describe_action
from groupcomm.core.messages import ControlMessage
from groupcomm.core.tracing import write_trace_dir
from groupcomm.wire.envelopes import decode_received


@dataclass
class CheckResult:
    """What a search found. ``result`` is ``ok``, ``violation`` or ``incomplete`` (stopped
    by ``max_states`` or interrupted before finishing, nothing found so far)."""

    result: str
    protocol: str
    processes: int
    messages: int
    property: str | None = None
    detail: str | None = None
    states: int = 0
    transitions: int = 0
    max_depth: int = 0
    terminal_states: int = 0
    seconds: float = 0.0
    stopped: str | None = None
    #: human-readable steps of the counterexample
    counterexample: list[str] = field(default_factory=list)
    #: causal / fifo: steps after the violation until the overtaken message is delivered
    #: as well, so the trace files show both deliveries (the definition in docs/trace_schema.md)
    completion: list[str] = field(default_factory=list)
    config: dict[str, Any] = field(default_factory=dict)
    #: the transitions of the counterexample and of its completion (to replay them)
    actions: list[tuple] = field(default_factory=list)
    completion_actions: list[tuple] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """The fields but the transitions (copied), the rate after the seconds."""
        out: dict[str, Any] = {}
        for name in (item.name for item in fields(self)):
            if name not in ("actions", "completion_actions"):
                out[name] = copy(getattr(self, name))
            if name == "seconds":
                out[name] = round(self.seconds, 3)
                out["states_per_second"] = (round(self.states / self.seconds)
                                            if self.seconds else None)
        return out


def _texts(model: Model, actions: list[tuple], violation: Violation) -> list[str]:
    """The step texts of a counterexample (its last step the violation, unless the
    violation is of a terminal state)."""
    texts = []
    state = model.initial_state
    for n, action in enumerate(actions):
        if n == len(actions) - 1 and violation.action is not None:
            texts.append(_text_of_failed(action, violation))
            break
        state, text = model.apply(state, action)
        texts.append(text)
    return texts


def _complete(model: Model, actions: list[tuple], missing: tuple[int, int, int],
              limit: int = 200_000) -> tuple[list[tuple], list[str]]:
    """A shortest continuation of ``actions`` (whose last step broke causal or FIFO
    order) in which the overtaken message is delivered too; ``([], [])`` if none is
    found within ``limit`` states."""
    i, s, n = missing
    model.lenient = True
    try:
        state = model.initial_state
        for action in actions:
            state, _ = model.apply(state, action)
        start = state
        seen = {start}
        frontier: deque[tuple[tuple, tuple | None]] = deque([(start, None)])
        while frontier and len(seen) < limit:
            state, path = frontier.popleft()
            if (s, n) in state[2][i][3]:
                found: list[tuple] = []
                texts: list[str] = []
                while path is not None:
                    action, text, path = path
                    found.append(action)
                    texts.append(text)
                return found[::-1], texts[::-1]
            for action, nxt, text in model.expand(state)[0]:  # (up to a violation)
                if nxt not in seen:
                    seen.add(nxt)
                    frontier.append((nxt, (action, text, path)))
        return [], []
    finally:
        model.lenient = False


def _text_of_failed(action: tuple, violation: Violation) -> str:
    if action[0] != "arrive":
        return f"{describe_action(action)}: VIOLATION {violation.prop}"
    if is_notice(action[3]):
        return f"{action[2]} is told {notice_text(action[3])}: VIOLATION {violation.prop}"
    try:
        message = decode_received(action[3], action[2])
        what = (message.user_message.kind if isinstance(message.user_message, ControlMessage)
                else f"{message.message_id} ({message.kind})")
    except Exception:  # noqa: BLE001 - only for the text
        what = "a frame"
    return f"{action[2]} receives {what} from {action[1]}: VIOLATION {violation.prop}"


def replay(config: CheckConfig, actions: list[tuple]) -> tuple[list[str], list[dict[str, Any]]]:
    """Run ``actions`` from the initial state with tracing on: the step texts and the
    trace records (docs/trace_schema.md). The violating last step is run too: a refused send
    is recorded as the application's ``send`` (never delivered), other violations keep
    the records the real nodes wrote up to the failure."""
    model = build_model(config, trace=True)
    model.lenient = True  # run on past a causal / FIFO violation (the completion)
    state = model.initial_state
    texts = []
    for n, action in enumerate(actions):
        try:
            state, text = model.apply(state, action)
        except Violation as violation:
            if n != len(actions) - 1:
                raise
            texts.append(f"{describe_action(action)}: VIOLATION {violation.prop}")
            if violation.prop == "refused":
                _record_refused_send(model, state, action)
            break
        texts.append(text)
    if isinstance(model, ChurnModel):
        model.record_end(state)
    return texts, model.records()


def _record_refused_send(model: Model, state: tuple, action: tuple) -> None:
    _, who, dests = action
    i = model.index[who]
    left, vc, sent, _ = state[2][i]
    own = list(vc)
    own[i] += 1
    model.tracer.emit({
        "ts": float(model.step), "process": who, "event": "send", "protocol":
        model.config.protocol, "msg": f"{who}#{len(sent) + 1}", "sender": who,
        "dests": list(dests), "vc": {n: c for n, c in zip(model.names, own, strict=True) if c},
        "refused": True,
    })


def write_counterexample(config: CheckConfig, result: CheckResult,
                         trace_dir: str | os.PathLike[str]) -> list[Path]:
    """Write the counterexample of ``result`` (with its completion, if any) as
    ``<process>.jsonl`` trace files."""
    _, records = replay(config, result.actions + result.completion_actions)
    return write_trace_dir(records, trace_dir)
