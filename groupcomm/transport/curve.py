"""CurveZMQ encryption and per-client keys (``zmq.auth``; docs/security.md): a
directory holds ``NAME.key`` (public) and ``NAME.key_secret`` per party, ``server`` for
the server. The server needs ``server.key_secret`` and every client's ``NAME.key``; a
client its ``NAME.key_secret`` and ``server.key``."""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import zmq
import zmq.auth
from zmq.auth.thread import ThreadAuthenticator
from zmq.utils import z85

log = logging.getLogger(__name__)

SERVER = "server"
_NAME = re.compile(r"^[A-Za-z0-9_.@-]{1,64}$")


class CurveKeyError(ValueError):
    """A key file is missing or unreadable."""


def _load(path: Path, secret: bool) -> tuple[bytes, bytes | None]:
    if not path.is_file():
        raise CurveKeyError(f"no key file {path}")
    try:
        public, secret_key = zmq.auth.load_certificate(str(path))
    except (OSError, ValueError) as error:
        raise CurveKeyError(f"cannot read key file {path}: {error}") from None
    if secret and not secret_key:
        raise CurveKeyError(f"{path} holds no secret key")
    return public, secret_key


@dataclass(frozen=True)
class ClientKeys:
    """What a client needs: its own pair and the server's public key."""

    public: bytes
    secret: bytes
    server_public: bytes

    @classmethod
    def from_dir(cls, directory: str | Path, name: str) -> ClientKeys:
        """``NAME.key_secret`` and ``server.key`` from ``directory``."""
        base = Path(directory)
        public, secret = _load(base / f"{name}.key_secret", secret=True)
        server_public, _ = _load(base / f"{SERVER}.key", secret=False)
        assert secret is not None
        return cls(public, secret, server_public)

    def apply(self, socket: zmq.Socket) -> None:
        """Make ``socket`` a CurveZMQ client of the server."""
        socket.curve_secretkey = self.secret
        socket.curve_publickey = self.public
        socket.curve_serverkey = self.server_public


@dataclass(frozen=True)
class ServerKeys:
    """What the server needs: its pair and every allowed client's public key by name."""

    public: bytes
    secret: bytes
    #: z85-encoded public key -> client name
    clients: dict[bytes, str]

    @classmethod
    def from_dir(cls, directory: str | Path) -> ServerKeys:
        """``server.key_secret`` and every other ``NAME.key`` of ``directory``."""
        base = Path(directory)
        public, secret = _load(base / f"{SERVER}.key_secret", secret=True)
        assert secret is not None
        clients: dict[bytes, str] = {}
        for path in sorted(base.glob("*.key")):
            if path.stem == SERVER:
                continue
            client_public, _ = _load(path, secret=False)
            clients[client_public] = path.stem
        if not clients:
            raise CurveKeyError(f"no client public keys (NAME.key) in {base}")
        return cls(public, secret, clients)

    def apply(self, socket: zmq.Socket) -> None:
        """Make ``socket`` a CurveZMQ server."""
        socket.curve_secretkey = self.secret
        socket.curve_publickey = self.public
        socket.curve_server = True


class _NamedAuthenticator(ThreadAuthenticator):
    """Accepts the listed client keys (it is its own credentials provider); the User-Id
    of a connection is the key's name."""

    def __init__(self, context: zmq.Context, clients: dict[bytes, str]) -> None:
        super().__init__(context, log=logging.getLogger(__name__ + ".zap"))
        self._names = dict(clients)

    def curve_user_id(self, client_public_key: bytes) -> str:
        # ZAP hands over the raw 32-byte key; key files hold it z85-encoded
        return self._names[z85.encode(client_public_key)]

    def callback(self, domain: str, key: bytes) -> bool:
        allowed = key in self._names  # z85-encoded, like the key files
        if not allowed:
            log.warning("refused a connection with an unknown client key")
        return allowed


def start_authenticator(context: zmq.Context, keys: ServerKeys) -> ThreadAuthenticator:
    """Start the ZAP handler of ``context`` allowing exactly ``keys.clients``; stop it
    with ``.stop()`` when the server's socket is closed."""
    auth = _NamedAuthenticator(context, keys.clients)
    auth.start()
    auth.configure_curve_callback(domain="*", credentials_provider=auth)
    return auth


def create_keys(directory: str | Path, names: Sequence[str]) -> list[Path]:
    """Create a key pair per name (``server`` for the server) in ``directory``."""
    base = Path(directory)
    base.mkdir(parents=True, exist_ok=True)
    made = []
    for name in names:
        if not _NAME.match(name):
            raise CurveKeyError(f"bad name {name!r}: letters, digits, _ . @ - only")
        if (base / f"{name}.key_secret").exists():
            raise CurveKeyError(f"{base / (name + '.key_secret')} exists; not overwriting")
        public_path, secret_path = zmq.auth.create_certificates(str(base), name)
        Path(secret_path).chmod(0o600)
        made += [Path(public_path), Path(secret_path)]
    return made
