"""The checker's tables keep one copy of each equal value (``ValuePool``), and ``exact``
copies only what holds a message: memory savings that must never merge two values the
search has to keep apart."""

from __future__ import annotations

from groupcomm.check.config import CheckConfig
from groupcomm.check.model import Model
from groupcomm.check.state import ValuePool, exact
from groupcomm.core.messages import ReceivedMessage
from tests.check.helpers import successors


def _message(vc: tuple) -> ReceivedMessage:
    return ReceivedMessage(application_name="app", session_name="s", user_message=None,
                           message_id="p1#1", sender="p1", headers={"M": (1, 2)}, vc=vc,
                           receiver="p2")


def test_equal_values_become_one_object_down_to_their_parts() -> None:
    pool = ValuePool()
    first = pool.share(((("p1", 1), ("p2", 2)), frozenset({(0, 1)}), b"frame", None))
    # built afresh (not the same objects), as every node snapshot is
    second = pool.share(((("p1", 1), ("p2", 2 + int("0"))), frozenset({(0, 1)}),
                         b"".join([b"fra", b"me"]), None))
    assert first == second
    assert first is second
    assert pool.share(("other", (("p1", 1), ("p2", 2))))[1] is first[0]


def test_a_flag_is_never_turned_into_a_count() -> None:
    pool = ValuePool()
    count = pool.share(((1,), 0))
    flag = pool.share(((True,), False))
    assert count == flag  # as Python compares them...
    assert type(flag[0][0]) is bool and type(flag[1]) is bool  # ...but kept apart
    assert flag[0] is not count[0]
    assert pool.share(1.0) is not pool.share(1) and type(pool.share(1.0)) is float


def test_messages_are_not_pooled_and_their_clock_is_kept() -> None:
    pool = ValuePool()
    early, late = _message((("p1", 1),)), _message((("p1", 2),))
    assert early == late  # messages compare without their ground-truth clock
    a = pool.share((("p1", 1), early))
    b = pool.share((("p1", 1), late))
    assert a[1] is early and b[1] is late
    assert a[0] is b[0]  # the parts without a message are still shared


def test_exact_copies_only_what_holds_a_message() -> None:
    plain = ((("p1", 1),), 2, ("p1", "p2"), (("causality:matrix", ((), (), (), 0)),))
    assert exact(plain) is plain
    message = _message((("p1", 1),))
    held = (plain[0], (("causality:matrix", ((), (), ((message, ()),), 0)),))
    key = exact(held)
    assert key[0] is plain[0]  # the part before the message is not copied
    assert key[1][0][1][2][0][0] == (message.freeze(), message.vc)
    later = (plain[0], (("causality:matrix", ((), (), ((_message((("p1", 2),)), ()),),
                                              0)),))
    assert held == later and exact(held) != exact(later)


def test_a_search_stores_each_distinct_part_of_its_snapshots_once() -> None:
    model = Model(CheckConfig(protocol="matrix", processes=3, messages=1))
    seen = [model.initial_state]
    for _ in range(3):
        seen = [nxt for state in seen for _action, nxt, _text in successors(model, state)]
    memberships = {id(snap[2]) for table in model.snapshots for snap in table.values()}
    assert len(memberships) == 1  # every snapshot's member list is one tuple
    assert sum(len(table) for table in model.snapshots) > 3
