"""The live session view's derivation (groupcomm.web.session_view) and the trace tail of
``groupcomm watch`` (groupcomm.web.trace_tail), on records written here."""

from __future__ import annotations

import json
from pathlib import Path

from groupcomm.web.session_view import SessionView, clock_text, concurrent, view_records
from groupcomm.web.trace_tail import TraceTail


def rec(ts: float, process: str, event: str, **fields) -> dict:
    return {"ts": ts, "process": process, "event": event, "protocol": "matrix", **fields}


def question_and_answer() -> list[dict]:
    """bob asks (bob#1), alice answers (alice#1) after seeing it; carol gets the answer
    first and holds it until the question comes."""
    everyone = ["alice", "bob", "carol"]
    return [
        rec(1.0, "bob", "send", msg="bob#1", sender="bob", dests=everyone, vc={"bob": 1}),
        rec(1.1, "alice", "deliver", msg="bob#1", sender="bob", vc={"alice": 1, "bob": 1}),
        rec(1.2, "alice", "send", msg="alice#2", sender="alice", dests=everyone,
            vc={"alice": 2, "bob": 1}),
        rec(1.3, "carol", "buffer", msg="alice#2", sender="alice", waiting_for=["bob"],
            send_vc={"alice": 2, "bob": 1}),
        rec(1.4, "bob", "deliver", msg="alice#2", sender="alice", vc={"alice": 2, "bob": 2}),
        rec(2.0, "carol", "deliver", msg="bob#1", sender="bob", vc={"bob": 1, "carol": 1}),
        rec(2.0, "carol", "unbuffer", msg="alice#2", sender="alice"),
        rec(2.0, "carol", "deliver", msg="alice#2", sender="alice",
            vc={"alice": 2, "bob": 1, "carol": 2}),
    ]


def state_at(view: SessionView, member: str, before: int) -> dict:
    """``member``'s state as of step ``before`` (the page's replay)."""
    return [s for s in view.steps if s["process"] == member and s["i"] <= before][-1]["state"]


def test_held_message_names_its_missing_cause_and_clocks() -> None:
    records = question_and_answer()
    view = view_records(records[:4])
    held = view.snapshot()["steps"][-1]["state"]["held"]
    assert [h["msg"] for h in held] == ["alice#2"]
    assert held[0]["causes"] == [{"sender": "bob", "msg": "bob#1", "needs": 1, "has": 0}]
    assert held[0]["text"] == ("carol holds alice#2: waits for bob#1 — alice#2's clock "
                               "[alice:2, bob:1] needs bob ≥ 1; carol has bob:0")


def test_release_of_the_held_message_and_replay() -> None:
    view = view_records(question_and_answer())
    hold = next(s for s in view.steps if s["kind"] == "hold")
    assert state_at(view, "carol", hold["i"])["held"]
    final = view.members["carol"]
    assert not final.held and final.delivered == ["bob#1", "alice#2"]
    assert final.clock == {"alice": 2, "bob": 1, "carol": 2}
    delivers = [s for s in view.steps if s["kind"] == "deliver"]
    assert all(not s["marks"] for s in delivers)  # causal order kept: nothing marked
    assert state_at(view, "carol", view.next_index)["held"] == []


def test_cause_known_only_from_the_hold_when_the_sender_trace_is_missing() -> None:
    # carol's trace alone: bob's send record is not there; the module named bob
    records = [r for r in question_and_answer() if r["process"] == "carol"]
    view = view_records(records[:1])
    text = view.snapshot()["steps"][-1]["state"]["held"][0]["text"]
    assert text == ("carol holds alice#2: waits for a message from bob — alice#2's clock "
                    "[alice:2, bob:1] needs bob ≥ 1; carol has bob:0")


def test_cause_learnt_later_refreshes_the_holder() -> None:
    records = question_and_answer()
    # carol's hold is read before bob's send (another file, read later)
    view = view_records([records[3], records[0]])
    assert view.steps[-1]["kind"] == "state" and view.steps[-1]["process"] == "carol"
    assert "waits for bob#1" in view.steps[-1]["state"]["held"][0]["text"]


def test_violation_marks_late_and_early_deliveries() -> None:
    # a module that does not wait (none): dave gets the answer before the question
    records = question_and_answer()[:3] + [
        rec(1.5, "dave", "deliver", msg="alice#2", sender="alice", vc={"alice": 2, "bob": 1, "dave": 1}),
        rec(1.6, "dave", "deliver", msg="bob#1", sender="bob", vc={"alice": 2, "bob": 1, "dave": 2}),
        rec(1.7, "dave", "deliver", msg="bob#1", sender="bob", vc={"alice": 2, "bob": 1, "dave": 3}),
    ]
    view = view_records(records)
    late = [s for s in view.steps if s["kind"] == "deliver" and "violation" in s["marks"]]
    assert [(s["process"], s["msg"], s["overtaken_by"]) for s in late] == [
        ("dave", "bob#1", ["alice#2"])]
    early_target = next(s for s in view.steps if s["kind"] == "deliver"
                        and s["process"] == "dave" and s["msg"] == "alice#2")["i"]
    assert [(s["target"], s["mark"]) for s in view.steps if s["kind"] == "mark"] == [
        (early_target, "early")]
    assert "duplicate" in view.steps[-1]["marks"]


def test_concurrent_deliveries_and_release_marks() -> None:
    records = [
        rec(1.0, "alice", "send", msg="alice#1", sender="alice", dests=["carol"], vc={"alice": 1}),
        rec(1.0, "bob", "send", msg="bob#1", sender="bob", dests=["carol"], vc={"bob": 1}),
        rec(1.1, "carol", "deliver", msg="alice#1", sender="alice", vc={"alice": 1, "carol": 1}),
        rec(1.2, "carol", "deliver", msg="bob#1", sender="bob", vc={"alice": 1, "bob": 1, "carol": 2}),
        rec(1.3, "carol", "deliver", msg="dan#4", sender="dan", vc={"alice": 1, "bob": 1, "carol": 3, "dan": 4}),
        rec(1.3, "carol", "release", client="eve", msgs=["dan#4", "dan#5"]),
        rec(1.4, "carol", "deliver", msg="dan#5", sender="dan", vc={"alice": 1, "bob": 1, "carol": 4, "dan": 5}),
        rec(1.5, "carol", "leave", client="dan"),
    ]
    view = view_records(records)
    by_msg = {s["msg"]: s for s in view.steps if s["kind"] == "deliver"}
    assert by_msg["bob#1"]["marks"] == ["concurrent"]
    assert by_msg["bob#1"]["concurrent_with"] == "alice#1"
    assert by_msg["dan#5"]["marks"] == ["released"]
    assert [(s["target"], s["mark"]) for s in view.steps if s["kind"] == "mark"] == [
        (by_msg["dan#4"]["i"], "released")]
    assert view.members["dan"].present is False
    assert concurrent({"a": 1}, {"b": 1}) and not concurrent({"a": 1}, {"a": 2, "b": 1})


def test_events_the_view_does_not_read_make_no_steps() -> None:
    view = SessionView()
    assert view.add(rec(1.0, "a", "network_send", msg="a#1", kind="normal", meta_bytes=3)) == []
    assert view.records == 0 and view.snapshot()["steps"] == []


def test_kept_steps_are_bounded() -> None:
    view = SessionView(max_steps=10)
    for n in range(1, 31):
        view.add(rec(n, "a", "send", msg=f"a#{n}", sender="a", dests=["b"], vc={"a": n}))
    view.add(rec(31, "b", "join", client="b"))
    snapshot = view.snapshot()
    assert len(snapshot["steps"]) == 10 and snapshot["dropped"] == 21
    # a's state before the kept steps starts the replay
    assert snapshot["base"]["a"]["clock"] == {"a": 21}


def test_tail_reads_appended_lines_and_skips_bad_ones(tmp_path: Path, caplog) -> None:
    lines = [json.dumps(r) for r in question_and_answer()]
    (tmp_path / "gateway").mkdir()
    alice = tmp_path / "alice.jsonl"
    alice.write_text(lines[0] + "\n" + "{not json\n" + lines[1][:20], encoding="utf-8")
    (tmp_path / "gateway" / "ann.jsonl").write_text(
        json.dumps({"ts": 1, "process": "ann", "event": "send", "protocol": "x"}) + "\n\n", encoding="utf-8")
    tail = TraceTail(tmp_path)
    first = tail.poll()
    assert [r["msg"] for r in first.records["."]] == ["bob#1"]
    assert first.records["gateway"] == [] and first.bad == 2
    assert tail.bad == {"not JSON (Expecting property name enclosed in double quotes)": 1,
                        "send without 'msg'": 1}
    assert "alice.jsonl:2: bad trace line skipped (not JSON" in caplog.text
    assert "ann.jsonl:1: bad trace line skipped (send without 'msg'" in caplog.text
    # the cut line is completed by the writer: read whole, once
    with open(alice, "a", encoding="utf-8") as handle:
        handle.write(lines[1][20:] + "\n" + lines[2] + "\n")
    second = tail.poll()
    assert [r["msg"] for r in second.records["."]] == ["bob#1", "alice#2"]
    assert second.bad == 0 and tail.poll().records["."] == []


def test_tap_tracer_hands_on_view_events_and_writes_each_member_id_file(tmp_path: Path) -> None:
    from groupcomm.core.tracing import trace_file_stem
    from groupcomm.web.live import LiveViews, TapTracer

    live = LiveViews(("im",))
    got: list[dict] = []
    tracer = TapTracer(got.append, tmp_path)
    records = question_and_answer()
    network = rec(1.05, "bob", "network_send", msg="bob#1", kind="normal", meta_bytes=9)
    for record in [records[0], network, {**records[1], "process": "alice~2"}]:
        tracer.emit(record)
    tracer.close()
    assert [r["event"] for r in got] == ["send", "deliver"]
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"{trace_file_stem('alice~2')}.jsonl", "bob.jsonl"]
    assert len((tmp_path / "bob.jsonl").read_text().splitlines()) == 2
    live.feed("im", got)
    live.feed("edit", [])
    assert live.views["im"].next_index == 2 and sorted(live.views) == ["edit", "im"]


def test_cause_named_from_another_member_delivery_when_the_sender_writes_no_trace() -> None:
    # a gateway's view: bob is a terminal member, only the tabs alice and carol are traced
    records = [r for r in question_and_answer() if r["process"] != "bob"]
    view = view_records(records[:3])
    text = view.snapshot()["steps"][-1]["state"]["held"][0]["text"]
    assert text.startswith("carol holds alice#2: waits for bob#1 — "), text
    view = view_records(records)
    assert all(not s.get("marks") for s in view.steps)  # an inferred clock orders nothing


def test_a_member_forgets_its_oldest_deliveries_past_the_bound(monkeypatch) -> None:
    from groupcomm.web import session_view

    monkeypatch.setattr(session_view, "MAX_SENDS", 10)
    view = SessionView()
    for n in range(1, 26):
        view.add(rec(n, "b", "deliver", msg=f"a#{n}", sender="a", vc={"a": n, "b": n}))
    member = view.members["b"]
    assert len(member.delivered) <= 10 and member.delivered[-1] == "a#25"
    assert set(member.delivered) == member.delivered_set == set(member.delivery_steps)


def test_the_records_of_real_filters_explain_the_worked_example() -> None:
    """The worked example of the matrix module (tests/filters/test_modules.py) over the
    in-process network: P3 holds P2's question until P1's message to it arrives."""
    from groupcomm.tools.localnet import LocalNetwork

    net = LocalNetwork(["P1", "P2", "P3"], "matrix")
    m1 = net.send("P1", "Let's meet at 3pm", ["P3"])
    m2 = net.send("P1", "Can you join the meeting at 3pm?", ["P2"])

    def deliver(mid: str, dest: str) -> None:
        net.deliver(next(i for i, f in enumerate(net.in_flight)
                         if f.message_id == mid and f.dest == dest))

    deliver(m2.message_id, "P2")
    m3 = net.send("P2", "What is the meeting about?", ["P3"])
    deliver(m3.message_id, "P3")
    buffer = next(r for r in net.records if r["event"] == "buffer")
    assert buffer["send_vc"] == dict(m3.vc) and buffer["waiting_for"] == ["P1"]
    view = view_records(net.records)
    held = view.members["P3"].held[m3.message_id]
    own = m1.vc[0][1]
    assert view.explain(view.members["P3"], held) == (
        f"P3 holds {m3.message_id}: waits for {m1.message_id} — {m3.message_id}'s clock "
        f"{clock_text(dict(m3.vc))} needs P1 ≥ {own}; P3 has P1:0")
    deliver(m1.message_id, "P3")
    view = view_records(net.records)
    assert not view.members["P3"].held
    assert view.members["P3"].delivered == [m1.message_id, m3.message_id]
    assert not any(s.get("marks") for s in view.steps)


def test_matrix_members_show_the_sends_they_know_of_per_destination() -> None:
    records = question_and_answer()
    view = view_records(records)
    assert view.member_state(view.members["carol"])["sent_matrix"] == {
        "alice": {"alice": 1, "bob": 1, "carol": 1}, "bob": {"alice": 1, "bob": 1, "carol": 1}}
    # bob has not seen alice's answer when he asks: only his own question
    at_send = view.steps[0]["state"]
    assert at_send["sent_matrix"] == {"bob": {"alice": 1, "bob": 1, "carol": 1}}
    vector = view_records([{**r, "protocol": "vector"} for r in records])
    assert vector.member_state(vector.members["carol"])["sent_matrix"] is None


def test_a_step_shown_earlier_keeps_its_matrix_when_a_row_grows_later() -> None:
    """Rows are shared between the steps shown while they did not change; a row that
    grows is a new copy, so what an earlier step showed stays as it was."""
    view = view_records(question_and_answer())
    matrices = [s["state"]["sent_matrix"] for s in view.steps
                if s["process"] == "carol" and s["state"]["sent_matrix"]]
    firsts = [dict(m) for m in matrices]
    view.add({"event": "send", "process": "bob", "ts": 99.0, "msg": "bob#9",
              "vc": {"bob": 9, "alice": 2}, "dests": ["alice", "carol"]})
    view.add({"event": "deliver", "process": "carol", "ts": 99.5, "msg": "bob#9",
              "sender": "bob", "vc": {"bob": 9, "alice": 2}})
    assert [dict(m) for m in matrices] == firsts
    now = view.member_state(view.members["carol"])["sent_matrix"]
    assert now["bob"]["carol"] == matrices[-1]["bob"]["carol"] + 1
    assert now["alice"] is matrices[-1]["alice"]  # the row that did not grow: shared


def test_a_send_told_of_by_a_hold_first_is_counted_once() -> None:
    records = question_and_answer()
    # carol's hold of alice#2 is read before alice's send record (another file)
    view = view_records(records[:2] + [records[3], records[2]] + records[4:])
    assert view.member_state(view.members["carol"])["sent_matrix"]["alice"] == {
        "alice": 1, "bob": 1, "carol": 1}
    assert [m for _, m in view._by_sender["alice"]] == ["alice#2"]


def test_a_cause_learnt_from_a_later_delivery_refreshes_the_holder() -> None:
    # a gateway: bob writes no trace; carol's hold is recorded before alice's delivery
    # of bob's question tells its clock
    records = [r for r in question_and_answer() if r["process"] != "bob"]
    view = view_records([records[2], records[0]])
    assert [s["kind"] for s in view.steps] == ["hold", "deliver", "state"]
    assert "waits for bob#1" in view.steps[-1]["state"]["held"][0]["text"]
