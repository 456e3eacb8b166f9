"""What a tab may say on its WebSocket: one JSON object with a ``type``, checked before
anything acts on it."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

#: the largest message a tab may send, in bytes (a paste of the editor's longest run fits
#: as JSON even when every character is escaped)
MAX_MESSAGE = 128 * 1024
MAX_TEXT = 16_384  # characters of a chat line or an insert
MAX_DELETE = 16_384
#: tabs of one person on one page at once (each a member of its own: docs/web.md)
MAX_TABS = 16
#: a chat line's lasting id, made by the tab
LINE_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")


#: what the gateway takes, told to each tab in its welcome (the editor splits a paste
#: into inserts within them)
LIMITS = {"message": MAX_MESSAGE, "text": MAX_TEXT, "delete": MAX_DELETE}


class BadRequest(ValueError):
    """A message from a tab that is not one the gateway takes; ``ref``: the provisional
    id of the refused edit when the message named one (the tab takes that edit back)."""

    def __init__(self, reason: str, ref: str | None = None) -> None:
        super().__init__(reason)
        self.ref = ref


@dataclass(frozen=True)
class Request:
    type: str
    applied: int = 0
    fields: dict[str, Any] = field(default_factory=dict)


#: type -> the pages that take it
TYPES = {"hello": ("im", "edit"), "applied": ("im", "edit"), "say": ("im",),
         "held": ("im",), "release": ("im",), "edit": ("edit",), "cursor": ("edit",),
         "resync": ("edit",)}


def _count(data: dict[str, Any], key: str) -> int:
    value = data.get(key)
    if type(value) is not int or value < 0:
        raise BadRequest(f"{key!r} must be a count (an integer >= 0), not {value!r:.40}")
    return value


def _ident(value: Any, what: str, nullable: bool = False) -> str | None:
    if value is None and nullable:
        return None
    if not isinstance(value, str) or not value or len(value) > 200:
        raise BadRequest(f"{what} must be a character id (a string), not {value!r:.40}")
    return value


def _text(value: Any, what: str, limit: int = MAX_TEXT) -> str:
    if not isinstance(value, str) or not value:
        raise BadRequest(f"{what} must be a non-empty string, not {value!r:.40}")
    if len(value) > limit:
        raise BadRequest(f"{what} has {len(value):,} characters; at most {limit:,}")
    return value


def parse_request(kind: str, raw: str | bytes) -> Request:
    """The request in ``raw`` for a tab of page ``kind``; :class:`BadRequest` saying
    what is wrong."""
    size = len(raw.encode("utf-8") if isinstance(raw, str) else raw)
    if size > MAX_MESSAGE:
        raise BadRequest(f"message of {size:,} bytes; at most {MAX_MESSAGE:,}")
    try:
        data = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise BadRequest(f"not JSON: {error}") from None
    if not isinstance(data, dict):
        raise BadRequest(f"expected a JSON object, got {type(data).__name__}")
    kind_of = data.get("type")
    if kind_of not in TYPES:
        raise BadRequest(f"unknown type {kind_of!r:.40} (one of {', '.join(TYPES)})")
    if kind not in TYPES[kind_of]:
        raise BadRequest(f"{kind_of!r} is not taken on the {kind} page")
    if kind_of == "hello":
        tab = data.get("tab")
        if tab is not None and (type(tab) is not int or not 1 <= tab <= MAX_TABS):
            raise BadRequest(f"'tab' must be a tab number from 1 to {MAX_TABS}, not {tab!r:.40}")
        return Request("hello", fields={"user": data.get("user"), "token": data.get("token"),
                                        "tab": tab})
    if kind_of in ("held", "resync"):
        return Request(kind_of)
    if kind_of == "release":
        return Request("release", fields={"member": _text(data.get("member"), "member", 100)})
    applied = _count(data, "n" if kind_of == "applied" else "applied")
    if kind_of == "applied":
        return Request("applied", applied)
    if kind_of == "say":
        to = None if data.get("to") is None else _text(data["to"], "to", 100)
        local = data.get("local")  # the tab's name for the line, echoed in `sent`
        if local is not None and (not isinstance(local, str) or len(local) > 40):
            raise BadRequest(f"'local' must be a short string, not {local!r:.40}")
        # the tab's lasting name for the line (the same when it is sent again after a
        # drop): a private line carries it, for its receivers to show it once
        line = data.get("line")
        if line is not None and (not isinstance(line, str) or not LINE_ID.fullmatch(line)):
            raise BadRequest(f"'line' must be up to 64 letters, digits, '-' or '_', not "
                             f"{line!r:.40}")
        # when the tab's clock says the line was said (seconds since the epoch); absent:
        # the gateway's clock when it sends it
        said = data.get("said")
        if said is not None and (type(said) not in (int, float) or not 0 < said < 1e11):
            raise BadRequest(f"'said' must be seconds since the epoch, not {said!r:.40}")
        return Request("say", applied, {"text": _text(data.get("text"), "text"), "to": to,
                                        "local": local, "line": line,
                                        "said": float(said) if said else None})
    if kind_of == "cursor":
        # "other": a selection's other end (absent: a cursor only)
        return Request("cursor", applied, {"anchor": _ident(data.get("anchor"), "anchor", True),
                                           "selection": "other" in data,
                                           "other": _ident(data.get("other"), "other", True)})
    local = data.get("local")
    if not isinstance(local, str) or not local.startswith("~L") or len(local) > 40:
        raise BadRequest(f"'local' must be a provisional id like '~L1', not {local!r:.40}")
    try:
        op = _op(data.get("op"))
    except BadRequest as error:
        raise BadRequest(str(error), ref=local) from None
    return Request("edit", applied, {"op": op, "local": local})


def _op(op: Any) -> tuple:
    if not isinstance(op, list) or not op:
        raise BadRequest(f"'op' must be a list like [\"insert\", after, text], not {op!r:.40}")
    if op[0] == "insert" and len(op) == 3:
        return ("insert", _ident(op[1], "insert's 'after'", True), _text(op[2], "inserted text"))
    if op[0] == "delete" and len(op) == 2:
        target = op[1]
        if isinstance(target, list):
            if not target or len(target) > MAX_DELETE:
                raise BadRequest(f"a delete names 1 to {MAX_DELETE:,} characters")
            ids = tuple(_ident(t, "deleted id") for t in target)
            seen: set[str | None] = set()
            for ident in ids:
                if ident in seen:
                    raise BadRequest(f"a delete names {ident!r:.60} twice")
                seen.add(ident)
            return ("delete", ids)
        return ("delete", _ident(target, "deleted id"))
    raise BadRequest(f"'op' must be [\"insert\", after, text] or [\"delete\", ids], "
                     f"not {op!r:.60}")
