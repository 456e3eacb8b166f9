"""A state larger than a frame, between members (docs/sessions.md, "State transfer"):
the giver sends a :class:`StateReply` announcing the serialized state's parts (size,
digest, payload format), then the :class:`StatePart` messages; the newcomer puts them
back together under its limit and checks them before deserializing. Without I/O.

The parts arrive in order: they are one member's messages to one other, which causal
delivery hands over in the order they were sent.
"""

from __future__ import annotations

from groupcomm.core.session_messages import StatePart, StateReply
from groupcomm.wire.parts import DEFAULT_MAX_STATE, DEFAULT_PART_SIZE, Assembly, digest, split
from groupcomm.wire.payload import dump_payload, load_payload

__all__ = ["StateParts"]


class StateParts:
    """``part_size``: a serialized state larger than this goes in parts; ``max_state``:
    the largest state put back together (past it, :class:`~groupcomm.wire.parts.PartsError`
    before anything is buffered)."""

    def __init__(self, part_size: int = DEFAULT_PART_SIZE,
                 max_state: int = DEFAULT_MAX_STATE) -> None:
        self.part_size = part_size
        self.max_state = max_state
        #: member -> (the reply announcing its state, the parts so far)
        self._incoming: dict[str, tuple[StateReply, Assembly]] = {}

    def outgoing(self, reply: StateReply) -> list[StateReply | StatePart]:
        """What to send for ``reply``: itself, or its announcement and parts."""
        if not reply.available or reply.state is None:
            return [reply]
        try:
            fmt, data = dump_payload(reply.state)
        except Exception:  # noqa: BLE001 - the link reports it, and sends a stand-in
            return [reply]
        if len(data) <= self.part_size:
            return [reply]
        chunks = split(data, self.part_size)
        return [StateReply(available=True, reflected=reply.reflected, clock=reply.clock,
                           parts=len(chunks), fmt=fmt, size=len(data), digest=digest(data)),
                *(StatePart(index, chunk) for index, chunk in enumerate(chunks))]

    def announced(self, sender: str, reply: StateReply) -> None:
        """``sender`` announced its state in parts; raises ``PartsError`` past the limit."""
        self._incoming.pop(sender, None)
        self._incoming[sender] = (reply, Assembly(reply.parts, reply.size, reply.digest,
                                                  self.max_state))

    def expects(self, sender: str) -> bool:
        return sender in self._incoming

    def part(self, sender: str, part: StatePart) -> StateReply | None:
        """A part from ``sender``: the whole reply once the last came (None before).
        Parts that do not make a state raise (``PartsError``, or the deserializer's)."""
        reply, building = self._incoming[sender]
        try:
            data = building.add(part.index, part.data)
            if data is None:
                return None
            del self._incoming[sender]
            state = load_payload(reply.fmt, data)
        except Exception:
            self._incoming.pop(sender, None)
            raise
        return StateReply(available=True, state=state, reflected=reply.reflected,
                          clock=reply.clock)

    def forget(self, sender: str) -> None:
        self._incoming.pop(sender, None)
