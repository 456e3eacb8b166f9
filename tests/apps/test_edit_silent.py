"""A member that never types beside one making random edits, as real ``groupcomm edit
--batch`` processes: the silent member's clock acknowledgements let both collect, so the
characters each keeps stay within 1.1 times the text plus 1,000 (docs/replicated.md,
"Causal stability"), and the silent member's acknowledgements stay within one per
heartbeat, none once nothing new arrives."""

from __future__ import annotations

import time

import pytest

from groupcomm.apps.batch_editors import EditorSession

#: the communicator's default heartbeat (edit has no option for it)
HEARTBEAT = 0.5


def _within_bound(state: dict) -> bool:
    return state["kept"] <= 1.1 * len(state["text"]) + 1000


def _settled(editors: EditorSession, timeout: float) -> list[dict]:
    """Both editors' ``show`` once the reader has the typist's text and both keep
    within the bound (the reader's acknowledgement follows its last delivery by a
    heartbeat or two); the last states seen in the failure otherwise."""
    typist, reader = editors.editors
    wanted = typist.state(timeout)["text"]
    deadline = time.monotonic() + timeout
    while True:
        states = [typist.state(timeout), reader.state(timeout)]
        # the reader's acknowledgement comes within a heartbeat of its last delivery;
        # the bound alone can hold before it (few deletes), so both are waited for
        if (states[1]["text"] == wanted and all(_within_bound(s) for s in states)
                and states[1]["clock_acks_sent"] >= 1):
            return states
        if time.monotonic() > deadline:
            raise AssertionError(f"not settled in {timeout:g} s: " + "; ".join(
                f"{name} kept {s['kept']} for {len(s['text'])} characters, acks sent "
                f"{s['clock_acks_sent']}, received {s['clock_acks_received']}"
                for name, s in zip(("typist", "reader"), states, strict=True)))
        reader.ask("quiet 0.5", ("quiet",), timeout, "quiet")


def silent_member_run(edits: int, module: str = "matrix", timeout: float = 120.0) -> list[dict]:
    """``edits`` random edits at the typist beside a reader that never types; the two
    ``show`` states once settled."""
    with EditorSession(("typist", "reader"), module, session="silent",
                       timeout=30.0) as editors:
        typist, reader = editors.editors
        typist.ask(f"random {edits} 5", ("done",), timeout, "the random edits")
        states = _settled(editors, timeout)
    for state in states:
        assert state["failures"] == 0, state["last_failure"]
    return states


@pytest.mark.parametrize("module", ["matrix", pytest.param("vector", marks=pytest.mark.long)])
def test_a_silent_member_does_not_keep_the_typist_from_collecting(module: str) -> None:
    typist, reader = silent_member_run(2000, module)
    assert typist["text"] == reader["text"] and len(typist["text"]) > 1000
    assert reader["app_sends"] == 0 and reader["clock_acks_sent"] >= 1
    assert typist["clock_acks_received"] == reader["clock_acks_sent"]
    # it kept sending: its edits said its clock (at most one when the reader joined)
    assert typist["clock_acks_sent"] <= 1


@pytest.mark.long
def test_fifty_thousand_edits_beside_a_silent_member() -> None:
    typist, reader = silent_member_run(50_000, timeout=600.0)
    assert typist["text"] == reader["text"]


@pytest.mark.long  # seconds of typing, then of silence (tests/protocol/test_clock_acks.py
# checks the same in virtual time)
def test_a_silent_member_acknowledges_at_most_once_a_heartbeat_and_not_when_idle() -> None:
    # without the reliable layer, whose own acknowledgements of every frame received
    # would be frames of the reader too: this counts the clock's
    with EditorSession(("typist", "reader"), "matrix", "--no-reliable", session="acks",
                       timeout=30.0) as editors:
        typist, reader = editors.editors
        before = reader.state()
        started = time.monotonic()
        # about 4 s of typing at 25 keys a second: the reader delivers something new
        # in every heartbeat period
        typist.ask("typing 100 25 1", ("typed",), 60.0, "the typing")
        # the typing is over once the reader has applied nothing new and acknowledged
        # nothing more for a second (two heartbeats); a loaded machine may hand it the
        # last keys or cursor moves late
        during = reader.state()
        for _ in range(20):
            reader.ask("quiet 1", ("quiet",), 60.0, "quiet")
            settled = reader.state()
            if (settled["applied"], settled["clock_acks_sent"]) == (
                    during["applied"], during["clock_acks_sent"]):
                break
            during = settled
        elapsed = time.monotonic() - started
        sent = during["clock_acks_sent"] - before["clock_acks_sent"]
        assert 1 <= sent <= elapsed / HEARTBEAT + 1, (sent, elapsed)
        # the reader's frames are its acknowledgements (matrix: one frame each)
        assert during["frames_sent"] - before["frames_sent"] == sent
        # nothing new delivered: several heartbeats without an acknowledgement, and the
        # typist, which receives them, does not answer them (it acknowledged only once,
        # if at all, when the reader joined: it had sent nothing the reader had seen)
        reader.ask("quiet 2", ("quiet",), 60.0, "quiet")
        idle = reader.state()
        assert idle["clock_acks_sent"] == during["clock_acks_sent"]
        assert idle["frames_sent"] == during["frames_sent"]
        # (that one may come after typist_before was read: the heartbeat after the join)
        assert typist.state()["clock_acks_sent"] <= 1
        assert idle["applied"] == during["applied"]  # the typist had stopped
