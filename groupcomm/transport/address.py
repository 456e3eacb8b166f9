"""ZeroMQ endpoints as people type them: ``HOST:PORT`` becomes ``tcp://HOST:PORT``, and a
port out of range (which some ZeroMQ versions bind elsewhere, silently) is refused."""

from __future__ import annotations

import re
import socket

#: transports ZeroMQ offers besides tcp, passed on unchecked
_OTHER_TRANSPORTS = ("ipc://", "inproc://")
_TCP = re.compile(r"^(?:tcp://)?(?P<host>\[[0-9A-Fa-f:.]+\]|[^:/\s\[\]]+):(?P<port>\*|\d+)$")


class EndpointError(ValueError):
    """An address that is not ``tcp://HOST:PORT`` (or ``HOST:PORT``) with a valid port."""


def endpoint(text: str, what: str = "address") -> str:
    """``text`` as a ZeroMQ endpoint: ``HOST:PORT`` becomes ``tcp://HOST:PORT``; ports
    must be 0-65535 (0 or ``*`` picks a free port when binding).

    Raises :class:`EndpointError` naming ``what`` and the expected form.
    """
    text = text.strip()
    if text.startswith(_OTHER_TRANSPORTS):
        return text
    match = _TCP.match(text)
    if match is None:
        raise EndpointError(f"{what} {text!r} is not tcp://HOST:PORT or HOST:PORT "
                            "(for example tcp://127.0.0.1:5555)")
    port = match["port"]
    if port != "*" and not 0 <= int(port) <= 65535:
        raise EndpointError(f"{what} {text!r} has port {port}; ports are 0-65535")
    return f"tcp://{match['host']}:{port}"


def nobody_listens(address: str, timeout: float = 1.0) -> str | None:
    """Why nothing can be reached at the ``tcp://`` endpoint ``address`` (refused,
    unknown host), or None when something accepts a TCP connection there or there is no
    answer in ``timeout`` seconds. ZeroMQ at the other end ignores the connection, closed
    before its handshake."""
    match = _TCP.match(address)
    if match is None or not address.startswith("tcp://") or match["port"] == "*":
        return None
    host = match["host"].strip("[]")
    port = int(match["port"])
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return None
    except ConnectionRefusedError:
        return f"nothing listens at {host}:{port} (connection refused)"
    except socket.gaierror as error:
        return f"cannot resolve host {host!r} ({error.strerror})"
    except OSError:
        return None  # timed out or unreachable for now: let the join wait decide
