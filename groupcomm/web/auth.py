"""Who may use the gateway: a users file (JSON, readable by its owner only) of names and
the scrypt hashes of their login tokens (docs/web.md, "Security")."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
import secrets
from pathlib import Path
from typing import Any

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


class Users:
    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._users: dict[str, dict[str, str]] = self._load()

    def _load(self) -> dict[str, dict[str, str]]:
        if not self.path.exists():
            return {}
        try:
            data: Any = json.loads(self.path.read_text(encoding="utf-8"))
            users = data["users"]
            if not isinstance(users, dict) or not all(
                    isinstance(v, dict) and isinstance(v.get("salt"), str)
                    and isinstance(v.get("hash"), str) for v in users.values()):
                raise TypeError("entries must be {salt, hash}")
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


def login_link(url: str, name: str, token: str, page: str = "edit") -> str:
    """The link that logs ``name`` in on ``page`` (``im`` or ``edit``): the credential
    rides in the fragment, which browsers never send to a server."""
    from urllib.parse import urlencode

    return f"{url.rstrip('/')}/{page}#{urlencode({'user': name, 'token': token})}"
