"""Copies and images of the session protocol's state (groupcomm.check.plain_state): a
copy shares nothing that changes, and its image is the original's."""

from __future__ import annotations

import copy
from collections import Counter, OrderedDict, defaultdict, deque

from groupcomm.check.plain_state import clone, freeze
from groupcomm.check.server import ServerTable, registry_state
from groupcomm.core.messages import ReceivedMessage
from groupcomm.protocol.membership import Membership
from groupcomm.protocol.registry import Join, Leave, Notify, Relay, SessionRegistry


def joined_registry() -> SessionRegistry:
    registry = SessionRegistry(server_id="s", now=0.0)
    for name in ("p1", "p2"):
        registry.handle(Join(name, name, "app", "s", 0.0))
    return registry


def test_a_cloned_registry_is_equal_and_independent() -> None:
    registry = joined_registry()
    copied = clone(registry)
    assert freeze(vars(copied)) == freeze(vars(registry))
    assert freeze(vars(copied)) == freeze(vars(copy.deepcopy(registry)))
    before = registry_state(registry)
    copied.handle(Leave("p2", "p2", "app", "s", 0.0))
    copied.handle(Join("p3", "p3", "app", "s", 1.0))
    assert registry_state(registry) == before
    assert registry.members_of("app", "s") == ["p1", "p2"]
    assert copied.members_of("app", "s") == ["p1", "p3"]


def test_a_cloned_membership_is_independent() -> None:
    client = Membership("p1", heartbeat_interval=1.0, now=0.0)
    client.on_notice({"op": "welcome", "client": "p1", "incarnation": 1}, 0.0)
    message = ReceivedMessage(application_name="app", session_name="s", user_message="x",
                              message_id="p9#1", sender="p9", receiver="p1")
    client.admit(message, 0.0)  # an early frame: kept in a list of (expiry, message)
    copied = clone(client)
    assert freeze(vars(copied)) == freeze(vars(client))
    copied.on_notice({"op": "joined", "client": "p1", "all_users": ["p1", "p9"],
                      "addresses": {}, "is_new_session": True, "is_new_application": True},
                     0.0)
    assert copied.current == {"p1": "p1", "p9": "p9"} and copied.early == []
    assert client.current == {} and len(client.early) == 1
    assert copied.stats is not client.stats


def test_containers_keep_their_type_and_order() -> None:
    value = {"o": OrderedDict([("b", [1]), ("a", [2])]), "c": Counter({"x": 2}),
             "d": defaultdict(list, {"k": [1]}), "q": deque([[1], (2, 3)], maxlen=5),
             "s": {1, 2}, "t": ([1], "x")}
    copied = clone(value)
    assert copied == value
    assert list(copied["o"]) == ["b", "a"] and type(copied["c"]) is Counter
    assert copied["d"].default_factory is list and copied["q"].maxlen == 5
    for key in ("o", "d", "q", "s"):
        assert copied[key] is not value[key]
    assert copied["t"] is not value["t"] and copied["t"][0] is not value["t"][0]
    assert copied["q"][1] is value["q"][1]  # an immutable leaf is shared


def test_freeze_sees_insertion_order_and_not_set_order() -> None:
    assert freeze({"a": 1, "b": 2}) != freeze({"b": 2, "a": 1})
    assert freeze({3, 1, 2}) == freeze({1, 2, 3}) == (1, 2, 3)
    hash(freeze({"m": [Notify("c", "joined", {"all_users": ["p1"]})]}))


def test_the_server_table_memoizes_and_interns() -> None:
    table = ServerTable(SessionRegistry(server_id="s", now=0.0))
    first, actions = table.handle(table.initial, Join("p1", "p1", "app", "s", 0.0))
    assert [type(a).__name__ for a in actions] == ["Notify", "Notify"]
    assert table.handle(table.initial, Join("p1", "p1", "app", "s", 0.0)) == (first, actions)
    # a relay changes no membership: the same server state
    again, relayed = table.handle(first, Relay("p1", "p1", "app", "s", 0.0, ("p1",), b"f"))
    assert again == first and [type(a).__name__ for a in relayed] == ["Forward"]
    gone, _ = table.handle(first, Leave("p1", "p1", "app", "s", 0.0))
    assert table.members(gone, "app", "s") == [] and table.members(first, "app", "s") == ["p1"]
    assert len(table) == 3
