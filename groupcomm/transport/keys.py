"""Session keys: read from a file or the environment, or generated. The key itself is
never printed or logged, only the path of its file."""

from __future__ import annotations

import os
import secrets
from pathlib import Path

KEY_ENV = "GROUPCOMM_KEY"
KEY_FILE_ENV = "GROUPCOMM_KEY_FILE"
KEY_BYTES = 32


class SessionKeyError(ValueError):
    """A key file or key variable is unusable."""


def read_key_file(path: str | os.PathLike[str]) -> bytes:
    """The key in ``path`` (hex text, as written by :func:`write_new_key`)."""
    try:
        text = Path(path).read_text(encoding="ascii").strip()
    except OSError as error:
        raise SessionKeyError(f"cannot read key file {path}: {error.strerror}") from None
    except UnicodeDecodeError:
        raise SessionKeyError(f"key file {path} is not hex text") from None
    return _parse(text, f"key file {path}")


def _parse(text: str, where: str) -> bytes:
    try:
        key = bytes.fromhex(text)
    except ValueError:
        raise SessionKeyError(f"{where} must hold the key as hex digits") from None
    if len(key) < 16:
        raise SessionKeyError(f"{where} holds {len(key)} bytes; a session key needs at least 16")
    return key


def resolve_key(key_file: str | os.PathLike[str] | None = None) -> bytes | None:
    """The key from ``key_file`` when given, else from ``GROUPCOMM_KEY`` (hex), else from
    the file ``GROUPCOMM_KEY_FILE`` names, else ``None``."""
    if key_file is not None:
        return read_key_file(key_file)
    text = os.environ.get(KEY_ENV)
    if text:
        return _parse(text.strip(), f"${KEY_ENV}")
    path = os.environ.get(KEY_FILE_ENV)
    return read_key_file(path) if path else None


def write_new_key(path: str | os.PathLike[str]) -> bytes:
    """Generate a key and write it to ``path``, readable by its owner only."""
    key = secrets.token_bytes(KEY_BYTES)
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w", encoding="ascii") as handle:
        handle.write(key.hex() + "\n")
    os.chmod(target, 0o600)
    return key
