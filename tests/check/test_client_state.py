"""A member's state as the session checker keeps it (groupcomm.check.client_state)."""

from __future__ import annotations

from typing import Any

from groupcomm.check import client_state
from groupcomm.core.registry import get_module
from groupcomm.protocol.client import ClientProtocol
from groupcomm.protocol.inprocess import InProcessMember

#: ClientProtocol attributes that hold no state: configuration, callbacks, what counts or
#: reports, and the parts client_state keeps apart; ``inputs`` is empty between steps
PROTOCOL_FIXED = ("name", "session", "application", "codec", "streams", "out", "attested",
                  "stats", "rejects", "heartbeat_interval", "_filter_stacks", "inputs",
                  "_tracer_for", "_clock", "_sent_listener", "tracer", "session_listeners",
                  "event_listeners", "lock", "node", "port", "transfer",
                  "_undeliverable",
                  # a cache the host's members share (unpacked batches), no member's state
                  "batches",
                  # notices in parts: every frame of the model is under the frame limit
                  "notice_parts")
#: what the port and state transfer hold that is not state (configuration, callbacks)
PORT_FIXED = ("node", "lock", "inputs", "acknowledged_delivery", "post", "inbox_changed",
              "listeners", "on_caught_up", "caught_up_wanted")
#: (``parts``: states in parts, which the model's small states never are)
TRANSFER_FIXED = ("_member", "_provider", "_consumer", "on_holds", "parts")
#: InProcessMember attributes that hold no state
MEMBER_FIXED = ("name", "carrier", "routing", "codec", "streams", "listeners", "protocol")


def _unlisted(protocol: ClientProtocol, member: InProcessMember) -> tuple[set[str], set[str]]:
    """The attributes of ``protocol`` (its port and state transfer included) and
    ``member`` that are in no list, of state (client_state) or not."""
    return (set(vars(protocol)) - set(client_state.PROTOCOL_STATE) - set(PROTOCOL_FIXED)
            | set(vars(protocol.port)) - set(client_state.PORT_STATE) - set(PORT_FIXED)
            | set(vars(protocol.transfer)) - set(client_state.TRANSFER_STATE)
            - set(TRANSFER_FIXED),
            set(vars(member)) - set(client_state.MEMBER_STATE) - set(MEMBER_FIXED))


class _Nowhere:
    """A carrier that keeps what it is given."""

    def __init__(self) -> None:
        self.frames: list[Any] = []

    def command(self, member: Any, frame: bytes) -> None:
        self.frames.append(frame)

    def relay(self, member: Any, frame: bytes, dests: Any, message: Any) -> None:
        self.frames.append(frame)

    def push(self, member: Any, dest: str, frame: bytes, message: Any) -> None:
        self.frames.append(frame)


def _member(**options: Any) -> InProcessMember:
    module = get_module("matrix")
    return InProcessMember("a", _Nowhere(), now=0.0,
                           filter_stacks=([module.send_creator()], [module.receive_creator()]),
                           **options)


def test_every_attribute_of_a_member_is_kept_or_known_as_fixed() -> None:
    member = _member(state_provider=lambda: None, state_consumer=lambda state: None)
    assert _unlisted(member.protocol, member) == (set(), set())


def test_a_member_set_back_is_as_it_was_and_keys_alike() -> None:
    member = _member()
    before = client_state.capture(member)
    key = client_state.state_key(before)
    nodes: dict[str, Any] = {}
    client_state.restore(member, before, nodes)
    member.start("tcp://somewhere")  # the address it asks to be reached at is state
    assert member.carrier.frames
    assert client_state.state_key(client_state.capture(member)) != key
    client_state.restore(member, before, nodes)
    assert client_state.state_key(client_state.capture(member)) == key
    assert member.protocol.membership.phase == "joining"
