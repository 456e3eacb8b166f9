"""The durability point under SIGKILL: ten runs of ``groupcomm store-crash`` (real server
processes killed at random moments while two members type): nothing relayed is lost,
nothing is restored twice."""

from __future__ import annotations

import pytest

from groupcomm.cli.main import main


@pytest.mark.long
def test_ten_kill_9_runs_lose_and_duplicate_nothing(capsys) -> None:
    code = main(["store-crash", "--runs", "10", "--messages", "150", "--seed", "7"])
    out = capsys.readouterr().out
    print(out)
    total = out.strip().splitlines()[-1]
    assert total.startswith("total: ")
    counts = dict(part.rsplit(" ", 1) for part in total[len("total: "):].split(", "))
    assert int(counts["relayed"]) > 0
    assert (counts["lost"], counts["duplicated"], counts["unknown"]) == ("0", "0", "0"), out
    assert code == 0
