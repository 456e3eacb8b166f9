"""The store backends the contract tests run against: each entry of :data:`BACKENDS`
makes a fresh, empty store location for a test (a backend needing a server starts it
in its own fixture and adds itself here)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from groupcomm.store.backend import StoreBackend, open_store


def _sqlite(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    yield str(tmp_path / "sessions.db")


def _postgresql(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    # a new database in the session's PostgreSQL server (tests/conftest.py), which skips
    # saying why when PostgreSQL or psycopg is missing
    yield request.getfixturevalue("postgres_server").create_database()


#: backend name -> a generator of fresh locations (setup before the yield, teardown after)
BACKENDS: dict[str, Callable[[pytest.FixtureRequest, Path], Iterator[str]]] = {
    "sqlite": _sqlite, "postgresql": _postgresql}


@pytest.fixture(params=sorted(BACKENDS))
def store_location(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh location for each backend in :data:`BACKENDS`."""
    yield from BACKENDS[request.param](request, tmp_path)


@pytest.fixture
def store(store_location: str) -> Iterator[StoreBackend]:
    backend = open_store(store_location)
    try:
        yield backend
    finally:
        backend.close()
