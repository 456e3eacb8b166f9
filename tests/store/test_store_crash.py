"""The durability point under SIGKILL: ``groupcomm store crash`` (real server processes
killed at random moments while two members type). With the reliable layer, as the apps
run by default, every message typed reaches the other member exactly once, those whose
first copy died inside the killed server included; without it those are lost, and in
both cases nothing relayed is missing from the store or restored twice."""

from __future__ import annotations

import pytest

from groupcomm.cli.main import main


def totals(out: str) -> dict[str, int]:
    total = out.strip().splitlines()[-1]
    assert total.startswith("total: "), out
    return {key: int(value) for key, value in
            (part.rsplit(" ", 1) for part in total[len("total: "):].split(", "))}


@pytest.mark.long
def test_ten_kill_9_runs_with_the_default_layer_lose_and_duplicate_nothing(capsys) -> None:
    code = main(["store", "crash", "--runs", "10", "--messages", "150", "--seed", "7"])
    out = capsys.readouterr().out
    print(out)
    counts = totals(out)
    assert counts["typed"] == 10 * 2 * 150 and counts["refused"] == 0, out
    assert counts["reached"] == counts["typed"], out
    # whether a kill catches frames inside the server depends on the machine's timing
    # (on an idle machine none may be): those it catches are retransmitted and counted
    # in "reached"; tests/apps/test_im_server_killed.py stops the server first, so that
    # lines are certainly inside it when it is killed
    assert [counts[k] for k in ("lost", "duplicated", "store_lost", "store_duplicated",
                                "unknown")] == [0, 0, 0, 0, 0], out
    assert code == 0


@pytest.mark.long
def test_without_the_layer_what_died_in_the_server_is_lost_and_the_store_keeps_the_rest(
        capsys) -> None:
    code = main(["store", "crash", "--runs", "3", "--messages", "150", "--seed", "7",
                 "--no-reliable"])
    out = capsys.readouterr().out
    print(out)
    counts = totals(out)
    assert counts["lost"] == counts["died_in_server"] == counts["typed"] - counts["reached"]
    assert [counts[k] for k in ("duplicated", "store_lost", "store_duplicated",
                                "unknown")] == [0, 0, 0, 0], out
    assert code == 0
