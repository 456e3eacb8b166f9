"""Renaming processes in what a state holds, for the symmetry reduction
(:mod:`groupcomm.check.symmetry`): every process name, message id ``name#k`` and control
id ``name~kindk`` in snapshot values, held messages (headers by the renamer the module
declares for each: :func:`declared_headers`) and frames (decoded, renamed and re-encoded
with the real codec).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from groupcomm.check.config import ConfigError
from groupcomm.core.messages import (
    GROUP_HEADER,
    ControlMessage,
    GroupMessage,
    ReceivedMessage,
    SentMessage,
)
from groupcomm.core.registry import available_modules
from groupcomm.module_kit import rename_clock, rename_matrix
from groupcomm.wire.envelopes import decode_message, encode_message


class SymmetryError(ConfigError):
    """Symmetry reduction cannot be used (or met a value it cannot rename)."""


_ATOMS = (int, bool, float, bytes, type(None))


def _rename_ks_log(value: Any, name: Callable[[str], str]) -> Any:
    from groupcomm.filters.ks import rename_log

    return rename_log(value, name)


def _rename_site(value: Any, name: Callable[[str], str]) -> Any:
    return (name(value[0]), value[1]) if value else value


def _same(value: Any, name: Callable[[str], str]) -> Any:
    if not isinstance(value, int):
        raise SymmetryError(f"expected an integer header, got {value!r:.60}")
    return value


#: how to rename a header value, by the kind a module declares for it
#: (:attr:`~groupcomm.core.causality.CausalityModule.symmetry_headers`)
RENAMERS: dict[str, Callable[[Any, Callable[[str], str]], Any]] = {
    "matrix": rename_matrix,
    "clock": rename_clock,
    "site": _rename_site,
    "ks-log": _rename_ks_log,
    "int": _same,
}


def declared_headers(module: Any) -> dict[str, Callable[[Any, Callable[[str], str]], Any]] | None:
    """The renamer of each header ``module`` declares (on its exact class), or None when
    the module has not declared itself safe to rename. A declared kind is one of
    :data:`RENAMERS`' names, or the module's own renamer ``(value, rename)`` (a header of
    a shape of its own; docs/writing-a-module.md). Raises :class:`SymmetryError` for a
    kind that is neither."""
    declared = type(module).__dict__.get("symmetry_headers")
    if declared is None:
        return None
    # the node's own header on the copies of a split multicast: the number of the
    # send's first copy, which no filter reads
    renamers: dict[str, Callable[[Any, Callable[[str], str]], Any]] = {GROUP_HEADER: _same}
    for key, kind in declared.items():
        if callable(kind):
            renamers[key] = kind
            continue
        if kind not in RENAMERS:
            raise SymmetryError(f"{type(module).__name__} declares header {key!r} of kind "
                                f"{kind!r}; symmetry knows {', '.join(sorted(RENAMERS))}")
        renamers[key] = RENAMERS[kind]
    return renamers


def supported_modules() -> list[str]:
    """The installed modules that declare :attr:`symmetry_headers` on their own class."""
    return sorted(name for name, info in available_modules().items()
                  if info.factory.__dict__.get("symmetry_headers") is not None)


class Renaming:
    """One permutation of the process names, applied to values (memoized strings)."""

    def __init__(self, mapping: dict[str, str], order: dict[str, int], strip: bool,
                 headers: dict[str, Callable[[Any, Callable[[str], str]], Any]],
                 relabel: dict[str, tuple[int, int]] | None = None) -> None:
        self.mapping = mapping
        self.order = order
        #: the module's headers and how to rename each (:func:`declared_headers`)
        self.headers = headers
        #: drop the number of control ids (the key's name-free normalisation)
        self.strip = strip
        #: concrete renumbering of control ids (tests): sender -> (c, _): k -> c - k
        self.relabel = relabel
        self._strings: dict[str, str] = {}

    def name(self, value: str) -> str:
        try:
            return self.mapping[value]
        except KeyError:
            raise SymmetryError(f"{value!r} is not a process name") from None

    def string(self, value: str) -> str:
        out = self._strings.get(value)
        if out is None:
            out = self._strings[value] = self._string(value)
        return out

    def _string(self, value: str) -> str:
        mapping = self.mapping
        if value in mapping:
            return mapping[value]
        prefix, sep, rest = value.partition("#")
        if sep and prefix in mapping and rest.isdigit():
            return f"{mapping[prefix]}#{rest}"
        prefix, sep, rest = value.partition("~")
        if sep and prefix in mapping:
            kind = rest.rstrip("0123456789")
            number = rest[len(kind):]
            if self.strip:
                return f"{mapping[prefix]}~{kind}"
            if self.relabel is not None and number:
                base = self.relabel[prefix][0]
                number = str(base - int(number))
            return f"{mapping[prefix]}~{kind}{number}"
        return value

    def value(self, value: Any) -> Any:
        kind = type(value)
        if kind is str:
            return self.string(value)
        if kind is tuple:
            return tuple([self.value(v) for v in value])
        if isinstance(value, GroupMessage):
            return self.message(value)
        if kind in _ATOMS:
            return value
        if kind is frozenset:
            return frozenset(self.value(v) for v in value)
        raise SymmetryError(f"cannot rename a {kind.__name__} in a snapshot")

    def names(self, names: tuple[str, ...]) -> tuple[str, ...]:
        order = self.order
        return tuple(sorted((self.name(n) for n in names), key=order.__getitem__))

    def message(self, message: GroupMessage) -> GroupMessage:
        user = message.user_message
        if isinstance(user, ControlMessage):
            user = ControlMessage(user.protocol, user.kind, self.string(user.about)
                                  if user.about else user.about)
        elif user is not None:
            raise SymmetryError("cannot rename a message with an application payload")
        headers = {}
        for key, value in message.headers.items():
            rename = self.headers.get(key)
            if rename is None:
                raise SymmetryError(f"unknown header {key!r} (the module declares "
                                    f"{', '.join(sorted(self.headers)) or 'none'})")
            headers[key] = rename(value, self.name)
        common = {
            "application_name": message.application_name,
            "session_name": message.session_name,
            "user_message": user,
            "message_id": self.string(message.message_id),
            "sender": self.name(message.sender),
            "headers": headers,
            # sorted, as the node's clock always is when it tags (restored sorted)
            "vc": tuple(sorted((self.name(n), c) for n, c in message.vc)),
            "kind": message.kind,
        }
        if type(message) is SentMessage:
            return SentMessage(**common, destinations=self.names(message.destinations))
        if type(message) is ReceivedMessage:
            return ReceivedMessage(**common, receiver=self.name(message.receiver))
        raise SymmetryError(f"cannot rename a {type(message).__name__}")

    def frame(self, frame: bytes) -> bytes:
        renamed = self.message(decode_message(frame))
        assert isinstance(renamed, SentMessage)
        return encode_message(renamed)
