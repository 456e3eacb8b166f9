"""Over the reliable layer (the default), a keystroke to the other tabs of a session
leaves the sending tab's member as one frame numbered for each, so the gateway opens it
once for all its members (``/stats`` ``shared``), relayed through the server or pushed
to each member directly."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from groupcomm.web import bench, capacity
from groupcomm.web.auth import Users


@pytest.mark.long
@pytest.mark.parametrize("routing", ["relayed", "direct"])
def test_a_keystroke_to_the_tabs_of_a_session_is_opened_once_in_the_gateway(
        tmp_path: Path, routing: str) -> None:
    users_file = tmp_path / "users.json"
    store = Users(users_file)
    users_of = {"share": [f"t{k}" for k in range(4)]}
    tokens = {user: store.add(user) for users in users_of.values() for user in users}
    seen: list[dict] = []
    options = ["--direct"] if routing == "direct" else []
    with bench.Setup("matrix", [], *options, sessions=list(users_of),
                     users_file=users_file) as setup:

        def stats() -> dict:
            found = setup.stats()
            seen.append(found)
            return found

        step = asyncio.run(capacity.run_step(
            setup.url_of(), tokens, users_of, 3.0, 2.0,
            {**setup.pids(), "load": os.getpid()}, stats, lambda line: None,
            setup.gateway_of))
        final = stats()["gateways"][0]
    assert step.error is None and step.undelivered == 0 and step.expected > 0
    shared = final["shared"]
    # each batch sent to three tabs' members unpacked once, taken by the others
    assert shared["batches_reused"] >= step.expected // 2, shared
    if routing == "relayed":  # direct frames go uncompressed by default: no chunks
        assert shared["chunks_reused"] >= shared["chunks_inflated"], shared
        assert shared["chunks_reused"] > 0, shared
