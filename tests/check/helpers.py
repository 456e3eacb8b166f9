"""Helpers of the model checker's tests."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

from groupcomm.check import CheckConfig, Model, check
from groupcomm.check.state import Violation

ROOT = Path(__file__).resolve().parents[2]


def successors(model: Model, state: tuple) -> Iterator[tuple[tuple, tuple, str]]:
    """The steps of ``model.expand(state)``; raises its violation after them."""
    steps, violation = model.expand(state)
    yield from steps
    if violation is not None:
        raise violation


def run(protocol: str, processes: int, messages: int, **options) -> object:
    """``check`` with a config built from the arguments."""
    return check(CheckConfig(protocol=protocol, processes=processes, messages=messages,
                             **options))


#: known-bad protocols at the bounds where each shows its violation
KNOWN_BAD = [
    # protocol, processes, messages, options, property
    ("none", 2, 2, {}, "fifo"),
    ("fifo", 3, 2, {}, "causal"),
    ("cykas-secret-sends", 3, 2, {}, "causal"),
    ("scalar-id", 3, 1, {}, "causal"),
    ("last-sender", 3, 1, {}, "causal"),
    ("vector", 3, 1, {"destinations": "unicast"}, "refused"),
]

#: small bounds on which reductions are compared with the plain search
SMALL = [("none", 2, 2), ("fifo", 3, 1), ("fifo", 2, 2), ("matrix", 2, 2), ("mfss", 2, 2),
         ("cykas", 2, 2), ("fifo", 3, 2), ("scalar-id", 3, 1),
         ("vector", 2, 2), ("matrix", 3, 1)]


def random_states(model: Model, walks: int, seed: int) -> list[tuple]:
    """States along random walks from the initial state to a terminal state (or a
    violation): a sample that reaches deep into the state space."""
    rng = random.Random(seed)
    out = []
    for _ in range(walks):
        state = model.initial_state
        while True:
            out.append(state)
            actions = model.enabled(state)
            if not actions:
                break
            try:
                state, _ = model.apply(state, rng.choice(actions))
            except Violation:
                break
    return out
