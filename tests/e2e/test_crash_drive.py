"""The random-kill drive, small (`tests/support/crash_drive.py`; `bench/crash_drive.py` runs the
big one): `workqueue run` killed with -9, its process group killed, and a SIGHUP; its keeper
killed, and manager and keeper killed together - restarted each time: no item lost, none
completed twice, none interrupted, and the ledger's attempts are the workers' starts."""

from __future__ import annotations

import pytest

from tests.support.crash_drive import drive


@pytest.mark.parametrize(
    "ends",
    [
        {"kills": 3, "group_kills": 1, "hangups": 1},
        {"kills": 1, "group_kills": 0, "hangups": 0, "keeper_kills": 2, "both_kills": 2},
    ],
    ids=["manager", "keeper-and-both"],
)
def test_kills_at_random_moments_lose_nothing_and_run_nothing_twice(tmp_path, ends):
    result = drive(tmp_path, items=30, parallelism=4, low=0.2, high=1.0, seed=7,
                   between=(0.4, 1.5), **ends)  # fmt: skip
    assert result.last_exit == 0, result.log
    assert result.lost == 0, result.summary()
    assert result.completed_twice == 0, result.summary()
    assert result.interrupted == 0, result.summary()
    assert result.attempts == sum(result.starts.values()), result.summary()
