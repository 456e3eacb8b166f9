"""Shared fixtures: real processes on 127.0.0.1, always reaped."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from groupcomm.tools.procs import ProcessGroup


@pytest.fixture
def group(tmp_path: Path) -> Iterator[ProcessGroup]:
    """A session key and a running server process; peers are started by the test."""
    with ProcessGroup(tmp_path / "run", server_extra=["--heartbeat-timeout", "1.5"]) as started:
        yield started


@pytest.fixture(autouse=True)
def _reset_selectors() -> Iterator[None]:
    """Tests that install a module through the selectors must not leak it."""
    yield
    from groupcomm.core.filtering import ReceivedMessageFilterSelector, SendMessageFilterSelector

    SendMessageFilterSelector.reset()
    ReceivedMessageFilterSelector.reset()
