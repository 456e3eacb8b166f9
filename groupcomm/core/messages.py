"""Messages that travel through the send and receive pipelines.

Messages are immutable: a filter that stamps metadata makes a new message. Header values
are immutable, compactly encodable values (ints, strs, bytes, bools, ``None`` and nested
tuples of those), so a stamp is a send-time snapshot by construction and a message can
be hashed for the model checker. System messages (joins, leaves, control messages) are
:class:`SystemMessage` payloads that filters which do not own them pass on unchanged.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

HeaderValue = int | str | bytes | bool | None | tuple["HeaderValue", ...]

_ATOMS = (int, str, bytes, bool, type(None))


#: header the node puts on each copy of a send it splits into unicasts (``mfss``,
#: ``cykas``): ``(number of the first copy's id, the sender's clock entry at the first
#: copy)``, so that receivers (and state transfer) can tell the copies of one
#: application-level message from other messages, and relate it by its first copy
GROUP_HEADER = "g"


def _group(message: GroupMessage) -> tuple[int, int] | None:
    group = message.headers.get(GROUP_HEADER)
    if (type(group) is tuple and len(group) == 2 and type(group[0]) is int
            and type(group[1]) is int):
        return group  # type: ignore[return-value]
    return None


class MessageError(ValueError):
    """A message was built with fields of the wrong shape (a local mistake)."""


_ATOM_TYPES = frozenset(_ATOMS)


def _valid_header_value(value: Any) -> bool:
    if type(value) in _ATOM_TYPES:
        return True
    if isinstance(value, tuple):
        # the usual tuple (all ints, or all strs) is checked in one C-level pass
        if _ATOM_TYPES.issuperset(map(type, value)):
            return True
        for item in value:  # a loop, not all(<generator>): stamps are nested tuples
            if type(item) in _ATOM_TYPES or (
                    type(item) is tuple and _ATOM_TYPES.issuperset(map(type, item))):
                continue  # an atom, or a flat tuple of them (a clock's names or counts)
            if not _valid_header_value(item):
                return False
        return True
    return isinstance(value, _ATOMS)


def _explain_header_value(value: Any, path: str) -> None:
    """Raise :class:`MessageError` naming where in ``value`` the first bad part is."""
    if isinstance(value, _ATOMS):
        return
    if isinstance(value, tuple):
        for index, item in enumerate(value):
            _explain_header_value(item, f"{path}[{index}]")
        return
    raise MessageError(
        f"{path} has type {type(value).__name__}; header values must be int, str, bytes, "
        "bool, None or tuples of those (immutable, so metadata is a send-time snapshot)"
    )


def checked_headers(headers: Mapping[Any, Any]) -> Mapping[str, HeaderValue]:
    """``headers`` if every key is a str and every value a valid header value; raises
    :class:`MessageError` otherwise. The usual values (ints and flat tuples of atoms) are
    checked in C-level passes: this runs for every message that arrives with metadata."""
    for key, value in headers.items():
        if type(key) is not str:
            raise MessageError(f"header keys must be str, got {type(key).__name__}")
        if not _valid_header_value(value):
            _explain_header_value(value, f"header {key!r}")
    return headers


class SystemMessage:
    """Base class of messages that are not application payloads."""

    __slots__ = ()
    #: True for the few system messages the wire carries as pickled payloads (state
    #: transfer); control messages travel in a form of their own, the rest stay local
    travels_pickled: ClassVar[bool] = False


@dataclass(frozen=True, slots=True)
class ControlMessage(SystemMessage):
    """A causality module's own control message (ACK, YCT, ...): ``protocol`` names the
    module that owns it, ``about`` optionally the application message it concerns."""

    protocol: str
    kind: str
    about: str = ""


# Messages are built on every hop of the hot path: the generated frozen-dataclass
# __init__ costs twice as much as setting the slots directly, so the classes below
# write their own (still frozen: attribute assignment after construction raises).
_set = object.__setattr__
_EMPTY: Mapping[str, HeaderValue] = {}


def _init_group(
    obj: GroupMessage, application_name: str, session_name: str, user_message: Any,
    message_id: str, sender: str, headers: Mapping[str, HeaderValue] | None,
    vc: tuple[tuple[str, int], ...], kind: str,
) -> None:
    if type(message_id) is not str or not message_id:
        raise MessageError("message_id must be a non-empty string")
    if type(sender) is not str or not sender:
        raise MessageError("sender must be a non-empty string")
    headers = checked_headers(headers) if headers else _EMPTY
    _set(obj, "application_name", application_name)
    _set(obj, "session_name", session_name)
    _set(obj, "user_message", user_message)
    _set(obj, "message_id", message_id)
    _set(obj, "sender", sender)
    _set(obj, "headers", headers)
    _set(obj, "vc", vc)
    _set(obj, "kind", kind)


@dataclass(frozen=True, slots=True)
class Withdrawn:
    """Travels in place of a payload its sender could not send (too large, or not
    serializable), keeping the message's id, destinations and module headers, so that
    receivers' modules count it and nothing after it waits for ever; the receiver counts
    it (``withdrawn``) instead of handing it up, the sender reports it undeliverable."""

    reason: str


@dataclass(frozen=True, eq=False, slots=True, kw_only=True, init=False)
class GroupMessage:
    """What every pipeline stage sees. ``vc`` is the application-boundary vector clock
    of the send event: the oracle for traces and the tag the application sees, never
    counted as protocol metadata. Raises :class:`MessageError` when built with an empty
    id or sender, or with header values that are not immutable."""

    application_name: str
    session_name: str
    user_message: Any
    message_id: str
    sender: str
    headers: Mapping[str, HeaderValue] = field(default_factory=dict)
    vc: tuple[tuple[str, int], ...] = ()
    kind: str = "normal"

    def __init__(
        self, *, application_name: str, session_name: str, user_message: Any,
        message_id: str, sender: str, headers: Mapping[str, HeaderValue] | None = None,
        vc: tuple[tuple[str, int], ...] = (), kind: str = "normal",
    ) -> None:
        _init_group(self, application_name, session_name, user_message, message_id, sender,
                    headers, vc, kind)

    def is_user_message(self) -> bool:
        """True for application payloads, False for system messages."""
        return not isinstance(self.user_message, SystemMessage)

    def is_control_for(self, protocol: str) -> bool:
        """True when this is a control message owned by ``protocol``."""
        return (isinstance(self.user_message, ControlMessage)
                and self.user_message.protocol == protocol)

    @property
    def app_message_id(self) -> str:
        """The id of the application-level message: the id itself, or for a copy of a
        send split into unicasts, the id of its first copy (the same for every copy)."""
        group = _group(self) if self.headers else None
        return self.message_id if group is None else f"{self.sender}#{group[0]}"

    def with_headers(self, **updates: HeaderValue) -> GroupMessage:
        """A copy with ``updates`` merged into the headers."""
        checked_headers(updates)
        merged = dict(self.headers)
        merged.update(updates)
        return _with_headers(self, merged)

    def with_header(self, key: str, value: HeaderValue) -> GroupMessage:
        """A copy with the header ``key`` set to ``value`` (a send filter stamping: the
        one-header form of :meth:`with_headers`, without building keyword arguments)."""
        if type(value) not in _ATOM_TYPES and not _valid_header_value(value):
            _explain_header_value(value, f"header {key!r}")
        return with_header_unchecked(self, key, value)  # type: ignore[no-any-return]

    def without_headers(self, *names: str) -> GroupMessage:
        """A copy with the named headers removed (a receive filter consuming its stamp)."""
        headers = self.headers
        if len(headers) == 1 and len(names) == 1 and names[0] in headers:
            return _with_headers(self, _EMPTY)  # the usual case: the module's one stamp
        return _with_headers(
            self, {k: v for k, v in headers.items() if k not in names} or _EMPTY)

    def replace(self, **changes: Any) -> GroupMessage:
        """A copy with fields changed (``dataclasses.replace``)."""
        return dataclasses.replace(self, **changes)

    def freeze(self) -> tuple:
        """A hashable identity of everything that travels but the user payload (the model
        checker's states; ids are unique in a run, so the payload adds nothing)."""
        return (
            type(self).__name__,
            self.message_id,
            self.sender,
            self.kind,
            tuple(sorted(self.headers.items())),
            self._extra_key(),
            self.user_message if isinstance(self.user_message, SystemMessage) else None,
        )

    def _extra_key(self) -> tuple:
        return ()

    def __eq__(self, other: object) -> bool:
        return isinstance(other, GroupMessage) and self.freeze() == other.freeze()

    def __hash__(self) -> int:
        return hash(self.freeze())


@dataclass(frozen=True, eq=False, slots=True, kw_only=True, init=False)
class SentMessage(GroupMessage):
    """A message on its way out; ``destinations`` are client names."""

    destinations: tuple[str, ...] = ()

    def __init__(
        self, *, application_name: str, session_name: str, user_message: Any,
        message_id: str, sender: str, headers: Mapping[str, HeaderValue] | None = None,
        vc: tuple[tuple[str, int], ...] = (), kind: str = "normal",
        destinations: tuple[str, ...] = (),
    ) -> None:
        _init_group(self, application_name, session_name, user_message, message_id, sender,
                    headers, vc, kind)
        if type(destinations) is not tuple:
            raise MessageError("destinations must be a tuple of client names")
        for dest in destinations:
            if type(dest) is not str or not dest:
                raise MessageError("destinations must be non-empty client names")
        _set(self, "destinations", destinations)

    def _extra_key(self) -> tuple:
        return self.destinations

    def to(self, destinations: tuple[str, ...]) -> SentMessage:
        """A copy addressed to ``destinations`` (a multicast split per destination)."""
        return dataclasses.replace(self, destinations=tuple(destinations))

    def received_by(self, receiver: str) -> ReceivedMessage:
        """The :class:`ReceivedMessage` that ``receiver`` gets for this message (its
        fields were checked when this one was built)."""
        return received_unchecked(self.application_name, self.session_name,
                                  self.user_message, self.message_id, self.sender, self.vc,
                                  self.kind, receiver, self.headers)


@dataclass(frozen=True, eq=False, slots=True, kw_only=True, init=False)
class ReceivedMessage(GroupMessage):
    """A message that arrived; ``client_name`` is the sender (as in the slides)."""

    receiver: str = ""

    def __init__(
        self, *, application_name: str, session_name: str, user_message: Any,
        message_id: str, sender: str, headers: Mapping[str, HeaderValue] | None = None,
        vc: tuple[tuple[str, int], ...] = (), kind: str = "normal", receiver: str = "",
    ) -> None:
        _init_group(self, application_name, session_name, user_message, message_id, sender,
                    headers, vc, kind)
        _set(self, "receiver", receiver)

    @property
    def client_name(self) -> str:
        """The sending client's name."""
        return self.sender

    def _extra_key(self) -> tuple:
        return (self.receiver,)

    @property
    def tag(self) -> Tag:
        """The tagged-causal-delivery tag of this message (001): its send's vector clock."""
        return Tag(self.vc)

    @property
    def app_tag(self) -> Tag:
        """The tag of the application-level message: :attr:`tag`, or for a copy of a
        send split into unicasts, the tag of its first copy (the same for every copy, so
        a reply to one copy is not taken as concurrent with another)."""
        group = _group(self) if self.headers else None
        if group is None:
            return Tag(self.vc)
        return Tag(tuple((k, group[1] if k == self.sender else v) for k, v in self.vc))


# The hot paths (tagging a send, decoding an arrival) build messages from fields they
# have validated themselves. Storing through the slots' member descriptors, bound once
# here, skips the per-field attribute lookup that object.__setattr__ does: half the cost
# of the frozen constructor's checks-free equivalent. Still frozen afterwards. The two
# builders below repeat the common fields on purpose: a shared helper is one more call
# per message on both hot paths.
_new = object.__new__
(_set_app, _set_session, _set_user, _set_id, _set_sender, _set_headers, _set_vc,
 _set_kind) = (
    GroupMessage.__dict__[name].__set__
    for name in ("application_name", "session_name", "user_message", "message_id", "sender",
                 "headers", "vc", "kind")
)
_set_destinations = SentMessage.__dict__["destinations"].__set__
_set_receiver = ReceivedMessage.__dict__["receiver"].__set__


def sent_unchecked(
    application_name: str, session_name: str, user_message: Any, message_id: str,
    sender: str, vc: tuple[tuple[str, int], ...], destinations: tuple[str, ...],
    headers: Mapping[str, HeaderValue] = _EMPTY, kind: str = "normal",
) -> SentMessage:
    """A :class:`SentMessage` (header-less and ``normal`` unless told) from fields the
    caller vouches for (the node tagging an application send: its own name, a fresh id,
    member names; ``headers`` too): the constructor's checks cost a third of tagging."""
    obj = _new(SentMessage)
    _set_app(obj, application_name)
    _set_session(obj, session_name)
    _set_user(obj, user_message)
    _set_id(obj, message_id)
    _set_sender(obj, sender)
    _set_headers(obj, headers)
    _set_vc(obj, vc)
    _set_kind(obj, kind)
    _set_destinations(obj, destinations)
    return obj


def received_unchecked(
    application_name: str, session_name: str, user_message: Any, message_id: str,
    sender: str, vc: tuple[tuple[str, int], ...], kind: str, receiver: str,
    headers: Mapping[str, HeaderValue] = _EMPTY,
) -> ReceivedMessage:
    """A :class:`ReceivedMessage` from fields the caller vouches for (the codec, which
    checks every field of a decoded envelope, ``headers`` included: see
    :func:`checked_headers`)."""
    obj = _new(ReceivedMessage)
    _set_app(obj, application_name)
    _set_session(obj, session_name)
    _set_user(obj, user_message)
    _set_id(obj, message_id)
    _set_sender(obj, sender)
    _set_headers(obj, headers)
    _set_vc(obj, vc)
    _set_kind(obj, kind)
    _set_receiver(obj, receiver)
    return obj


def with_header_unchecked(message: GroupMessage, key: str, value: HeaderValue) -> Any:
    """:meth:`GroupMessage.with_header` for a value the caller vouches for: a module's own
    encoding of its state, built on every send (a sequence number; tuples of names and
    counts, whose check would cost a third of the copy)."""
    headers = message.headers
    if headers:
        merged = dict(headers)
        merged[key] = value
        return _with_headers(message, merged)
    if type(message) is SentMessage:
        # the usual case, a module stamping an application send that carries no header
        # yet: built by sent_unchecked, without _with_headers' type dispatch (every send)
        return sent_unchecked(message.application_name, message.session_name,
                              message.user_message, message.message_id, message.sender,
                              message.vc, message.destinations,  # type: ignore[attr-defined]
                              {key: value}, message.kind)
    return _with_headers(message, {key: value})


def without_header_unchecked(message: GroupMessage, key: str) -> Any:
    """:meth:`GroupMessage.without_headers` for one header: a receive filter consuming its
    stamp (a function, not a method taking ``*names``: this runs for every message a
    module delivers)."""
    headers = message.headers
    if len(headers) != 1 or key not in headers:
        return _with_headers(message, {k: v for k, v in headers.items() if k != key} or _EMPTY)
    if type(message) is ReceivedMessage:
        # the usual case, a module consuming its one stamp of an application message:
        # built by received_unchecked, without _with_headers' type dispatch (every delivery)
        return received_unchecked(message.application_name, message.session_name,
                                  message.user_message, message.message_id, message.sender,
                                  message.vc, message.kind,
                                  message.receiver)  # type: ignore[attr-defined]
    return _with_headers(message, _EMPTY)


def _with_headers(message: GroupMessage, headers: Mapping[str, HeaderValue]) -> Any:
    """A copy of ``message`` with ``headers`` (already checked) in place of its own, its
    other fields checked when ``message`` was built: through the builders above rather
    than ``dataclasses.replace`` and the constructor's checks (three times the cost)."""
    cls = type(message)
    if cls is SentMessage:
        return sent_unchecked(message.application_name, message.session_name,
                              message.user_message, message.message_id, message.sender,
                              message.vc, message.destinations,  # type: ignore[attr-defined]
                              headers, message.kind)
    if cls is ReceivedMessage:
        return received_unchecked(message.application_name, message.session_name,
                                  message.user_message, message.message_id, message.sender,
                                  message.vc, message.kind,
                                  message.receiver, headers)  # type: ignore[attr-defined]
    return dataclasses.replace(message, headers=headers)  # a subclass: fields of its own


class Tag:
    """A precise happens-before tag: the application-boundary vector clock of a send.

    Two tags relate exactly when the sends they stamp are related by happens-before as
    the applications saw them (source 001).
    """

    __slots__ = ("_clock",)

    def __init__(self, clock: tuple[tuple[str, int], ...] | Mapping[str, int]) -> None:
        self._clock = dict(clock)

    @property
    def clock(self) -> dict[str, int]:
        """A copy of the vector clock."""
        return dict(self._clock)

    def happened_before(self, other: Tag) -> bool:
        """True when this tag's send happened before ``other``'s."""
        return vc_less(self._clock, other._clock)

    def concurrent_with(self, other: Tag) -> bool:
        """True when neither send happened before the other (and they differ)."""
        return (self._clock != other._clock and not vc_less(self._clock, other._clock)
                and not vc_less(other._clock, self._clock))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Tag) and self._clock == other._clock

    def __hash__(self) -> int:
        return hash(tuple(sorted(self._clock.items())))

    def __repr__(self) -> str:
        return f"Tag({self._clock!r})"


def vc_less(a: Mapping[str, int], b: Mapping[str, int]) -> bool:
    """Strict componentwise order of two vector clocks (missing entries are 0)."""
    strictly = False
    for key in a.keys() | b.keys():
        x, y = a.get(key, 0), b.get(key, 0)
        if x > y:
            return False
        if x < y:
            strictly = True
    return strictly
