"""Analyses in these tests never reach an analysis server the user may be running
(``groupcomm analyze --serve``): its state files are looked for in a directory of
the test run's own."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True, scope="session")
def _private_analysis_server_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("GROUPCOMM_ANALYZE_SERVER_DIR",
                     str(tmp_path_factory.mktemp("analysis-server-state")))
        yield
