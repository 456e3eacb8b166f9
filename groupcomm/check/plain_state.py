"""Copying and freezing the plain state of the session protocol's objects (a
:class:`~groupcomm.protocol.registry.SessionRegistry`, a client's
:class:`~groupcomm.protocol.membership.Membership`) for the model checkers.

Such state is a tree of containers and plain objects whose leaves are immutable (strings,
numbers, tuples of them, frozen dataclasses such as messages): :func:`clone` copies the
containers and objects and shares the leaves (anything else goes to ``copy.deepcopy``),
and :func:`freeze` is its hashable image. Both pick a handler per type once: the type
dispatch is what the generic versions spend their time on.
"""

from __future__ import annotations

import copy
from collections import Counter, OrderedDict, defaultdict, deque
from collections.abc import Callable
from typing import Any

from groupcomm.core.messages import ReceivedMessage

__all__ = ["clone", "freeze"]

#: types whose values never change: shared, not copied
_IMMUTABLE = frozenset({int, float, complex, str, bytes, bool, type(None), frozenset, range})


def clone(value: Any) -> Any:
    """A copy of ``value`` that shares nothing mutable with it (see the module doc)."""
    kind = type(value)
    if kind in _IMMUTABLE:
        return value
    handler = _CLONERS.get(kind)
    if handler is None:
        handler = _CLONERS[kind] = _cloner_for(kind)
    return handler(value)


def _clone_tuple(value: tuple) -> tuple:
    parts = [clone(v) for v in value]
    if all(p is v for p, v in zip(parts, value, strict=True)):
        return value
    return tuple(parts)


def _clone_mapping(value: dict) -> dict:
    new = defaultdict(value.default_factory) if type(value) is defaultdict else type(value)()
    for k, v in value.items():
        new[k] = clone(v)  # (keys are hashable: immutable)
    return new


def _clone_object(value: Any) -> Any:
    new = object.__new__(type(value))
    new.__dict__.update({k: clone(v) for k, v in vars(value).items()})
    return new


def _cloner_for(kind: type) -> Callable[[Any], Any]:
    if kind is tuple:
        return _clone_tuple
    if kind in (dict, OrderedDict, Counter, defaultdict):
        return _clone_mapping
    if kind is list:
        return lambda value: [clone(v) for v in value]
    if kind is set:
        return set  # (elements are hashable: immutable)
    if kind is deque:
        return lambda value: deque((clone(v) for v in value), value.maxlen)
    params = getattr(kind, "__dataclass_params__", None)
    if params is not None and params.frozen:
        return lambda value: value
    if (hasattr(kind, "__dict__") and not hasattr(kind, "__slots__")
            and kind.__reduce_ex__ is object.__reduce_ex__
            and getattr(kind, "__deepcopy__", None) is None):
        return _clone_object
    return copy.deepcopy


_CLONERS: dict[type, Callable[[Any], Any]] = {}


def freeze(value: Any) -> Any:
    """A hashable, order-independent image of plain protocol state: a dict (whose
    insertion order is state too: join order, member lists) as ``("dict", pairs)``,
    lists, tuples and deques as tuples, sets sorted, a received message as its id and
    sender, a dataclass as its name and fields, anything else as it is."""
    kind = type(value)
    if kind in _IMMUTABLE and kind is not frozenset:
        return value
    handler = _FREEZERS.get(kind)
    if handler is None:
        handler = _FREEZERS[kind] = _freezer_for(kind)
    return handler(value)


def _freeze_tuple(value: tuple) -> tuple:
    # most tuples of protocol state hold only atoms (names, counts): kept as they are
    for v in value:
        if type(v) not in _ATOMS:
            return tuple([freeze(v) for v in value])
    return value


def _freeze_dict(value: dict) -> tuple:
    return ("dict", tuple([(k if type(k) in _ATOMS else freeze(k),
                            v if type(v) in _ATOMS else freeze(v))
                           for k, v in value.items()]))


def _freezer_for(kind: type) -> Callable[[Any], Any]:
    if issubclass(kind, dict):
        return _freeze_dict
    if kind is tuple:
        return _freeze_tuple
    if issubclass(kind, list | tuple | deque):
        return lambda value: tuple([freeze(v) for v in value])
    if issubclass(kind, set | frozenset):
        return lambda value: tuple(sorted((freeze(v) for v in value), key=repr))
    if issubclass(kind, ReceivedMessage):
        return lambda value: ("msg", value.message_id, value.sender)
    if hasattr(kind, "__dataclass_fields__"):
        name = kind.__name__
        fields = tuple(kind.__dataclass_fields__)
        return lambda value: (name, tuple(freeze(getattr(value, f)) for f in fields))
    return lambda value: value


_FREEZERS: dict[type, Callable[[Any], Any]] = {}
#: values freeze keeps as they are
_ATOMS = frozenset({int, float, str, bytes, bool, type(None)})
