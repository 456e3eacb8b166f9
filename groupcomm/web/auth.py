"""Who may use the gateway: a users file (JSON, readable by its owner only) of names and
the scrypt hashes of their login tokens (docs/web.md, "Security")."""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import os
import re
import secrets
import threading
from pathlib import Path
from typing import Any, Literal

log = logging.getLogger(__name__)

#: scrypt's cost (n, r, p): about 16 MiB and a few tens of milliseconds per check, what
#: a login may cost and what makes guessing from a stolen file expensive
SCRYPT_N, SCRYPT_R, SCRYPT_P = 2**14, 8, 1
TOKEN_BYTES = 24
#: a user name is a member name: what ``groupcomm im --name`` takes, without ``~``
NAME = re.compile(r"^[A-Za-z0-9_.-]{1,40}$")


class UsersError(ValueError):
    """A users file that cannot be read or written, or a bad user name."""


def _hash(token: str, salt: bytes) -> bytes:
    return hashlib.scrypt(token.encode("utf-8"), salt=salt, n=SCRYPT_N, r=SCRYPT_R,
                          p=SCRYPT_P, dklen=32)


#: what identifies one version of the users file: inode (a rewrite by ``user add`` moves a
#: new file in), size, modification and change times (an edit in place, a chmod)
Signature = tuple[int, int, int, int]


def _is_hex(text: str) -> bool:
    try:
        bytes.fromhex(text)
    except ValueError:
        return False
    return True


class Users:
    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._signature = self._stat()
        self._users: dict[str, dict[str, str]] = self._load()
        #: the signature of the last version that could not be read (logged once), in a
        #: tuple (the file being gone has the signature None)
        self._bad: tuple[Signature | None] | None = None
        self._refreshing = threading.Lock()

    def _stat(self) -> Signature | None:
        try:
            st = self.path.stat()
        except OSError:
            return None
        return (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)

    def refresh(self) -> Literal["reloaded", "reload_failed"] | None:
        """Read the file again if it changed since it was last read (one ``stat`` when
        it did not): ``"reloaded"``; ``"reload_failed"`` once per unreadable or
        malformed version, logged, the last good users kept; ``None``: nothing new."""
        with self._refreshing:
            return self._refresh()

    def _refresh(self) -> Literal["reloaded", "reload_failed"] | None:
        # stat before reading: a change between the two is seen at the next refresh
        signature = self._stat()
        if signature == self._signature or (signature,) == self._bad:
            return None
        try:
            if signature is None:  # gone: most likely a mistake, not "nobody may log in"
                raise UsersError(f"cannot read the users file {self.path}: it is gone")
            users = self._load()
        except UsersError as error:
            self._bad = (signature,)
            log.warning("%s; keeping the %d user(s) read before", error, len(self._users))
            return "reload_failed"
        # verify (on other threads) reads ``_users`` once: it sees the old or the new
        self._users, self._signature, self._bad = users, signature, None
        log.info("read the users file %s again: %d user(s)", self.path, len(users))
        return "reloaded"

    def _load(self) -> dict[str, dict[str, str]]:
        if not self.path.exists():
            return {}
        try:
            data: Any = json.loads(self.path.read_text(encoding="utf-8"))
            if not isinstance(data, dict) or "users" not in data:
                raise ValueError('expected a JSON object {"users": {name: {salt, hash}}}')
            users = data["users"]
            if not isinstance(users, dict) or not all(
                    isinstance(v, dict) and isinstance(v.get("salt"), str)
                    and isinstance(v.get("hash"), str) for v in users.values()):
                raise TypeError("entries must be {salt, hash}")
            for name, entry in users.items():  # hex, as verify reads them
                if not all(_is_hex(entry[key]) for key in ("salt", "hash")):
                    raise ValueError(f"{name!r:.60}: salt and hash must be hexadecimal")
            return users
        except (OSError, ValueError, KeyError, TypeError) as error:
            raise UsersError(f"cannot read the users file {self.path}: {error}") from None

    @property
    def names(self) -> list[str]:
        return sorted(self._users)

    def add(self, name: str) -> str:
        """Add ``name`` (or give it a new token, which voids the old one); returns the
        token, which is kept nowhere. :class:`UsersError` for a bad name."""
        if not isinstance(name, str) or not NAME.match(name):
            raise UsersError(f"user name {name!r:.60}: use 1 to 40 letters, digits, '_', "
                             "'.' or '-'")
        token = secrets.token_urlsafe(TOKEN_BYTES)
        salt = secrets.token_bytes(16)
        self._users[name] = {"salt": salt.hex(), "hash": _hash(token, salt).hex()}
        self._save()
        return token

    def remove(self, name: str) -> None:
        """Remove ``name`` (its token no longer logs in); :class:`UsersError` if it is
        not in the file."""
        if name not in self._users:
            known = ", ".join(self.names) or "none"
            raise UsersError(f"no user {name!r:.60} in {self.path} (users: {known})")
        del self._users[name]
        self._save()

    def _save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        partial = self.path.with_name(self.path.name + ".partial")
        # created readable by the owner only, then moved over the old file in one step
        fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump({"users": self._users}, out, indent=1, sort_keys=True)
        os.replace(partial, self.path)

    def verify(self, name: Any, token: Any) -> bool:
        """True when ``token`` is ``name``'s token (an unknown name costs the same)."""
        if not isinstance(name, str) or not isinstance(token, str) or len(token) > 200:
            return False
        entry = self._users.get(name)
        salt = bytes.fromhex(entry["salt"]) if entry else b"\0" * 16
        expected = bytes.fromhex(entry["hash"]) if entry else b"\0" * 32
        return hmac.compare_digest(_hash(token, salt), expected) and entry is not None


def login_link(url: str, name: str, token: str, page: str = "edit",
               session: str | None = None) -> str:
    """The link that logs ``name`` in on ``page`` (``im`` or ``edit``), in ``session``
    (None: the gateway's first): the credential rides in the fragment, which browsers
    never send to a server."""
    from urllib.parse import urlencode

    query = f"?{urlencode({'session': session})}" if session else ""
    return f"{url.rstrip('/')}/{page}{query}#{urlencode({'user': name, 'token': token})}"
