"""Two (and four) gateway processes serving the same sessions through RedisStore lose no update: each
process appends its (process, n) records with thousands of updates, and the final blob is
exactly the updates in the order Redis committed them."""

from __future__ import annotations

import hashlib
import itertools
from typing import Dict, List, Tuple

from redis_helpers import RECORD, client, records, run_workers

UPDATES = 3000
WORKERS = 4  # the processes of the one-key test at the default settings
# Fail-closed, so any update that does not reach Redis fails its worker. Generous bounds: the
# test is about lost updates, not about how slow a shared CI machine may get.
OPTIONS = {"on_error": "closed", "retries": 100, "timeout": 5.0}


def check_commit_order(final: Dict[str, bytes], committed: Dict[int, List[Tuple[str, int, bytes]]]) -> None:
    """Every update's committed blob is a prefix of its key's final blob, ending in its own
    record, at a length no other update committed: the final blob lists every update once, in
    commit order."""
    lengths: Dict[str, set[int]] = {key: set() for key in final}
    for worker, commits in committed.items():
        for n, (key, length, digest) in enumerate(commits):
            blob = final[key]
            assert hashlib.blake2b(blob[:length], digest_size=16).digest() == digest, (worker, n)
            assert blob[length - RECORD.size : length] == RECORD.pack(worker, n)
            assert length not in lengths[key]
            lengths[key].add(length)
    for key, blob in final.items():
        assert sorted(lengths[key]) == list(range(RECORD.size, len(blob) + 1, RECORD.size)), key


def test_two_processes_on_one_key_lose_no_update(redis_url: str, prefix: str) -> None:
    # Run again (with keys of its own) while the processes did not write in turn: on a loaded
    # machine the OS may run one's updates back to back, which proves nothing about contention.
    # Every run's updates are checked.
    for attempt in range(3):
        keys = f"{prefix}{attempt}:"
        committed, _ = run_workers(redis_url, ["hot"], workers=2, count=UPDATES, prefix=keys, **OPTIONS)
        connection = client(redis_url)
        final = {"hot": connection.hget(f"{keys}hot", "d")}
        connection.close()
        found = records(final["hot"])
        assert len(found) == 2 * UPDATES
        for worker in (0, 1):
            assert [n for w, n in found if w == worker] == list(range(UPDATES))
        check_commit_order(final, committed)
        # Both processes wrote in turn, not one after the other.
        if sum(1 for before, after in itertools.pairwise(found) if before[0] != after[0]) > 10:
            return
    raise AssertionError("the processes never wrote in turn in 3 runs")


def test_four_processes_on_one_key_at_the_default_settings_lose_and_fail_no_update(redis_url: str, prefix: str) -> None:
    # Sustained contention: four processes updating one key as fast as they can, with the
    # default retries and timeout. Fail-closed, so an update whose attempts all lose (or whose
    # wait for a turn runs out) fails its worker instead of being kept locally.
    updates = 1500
    for attempt in range(3):
        keys = f"{prefix}four{attempt}:"
        committed, _ = run_workers(redis_url, ["hot"], workers=WORKERS, count=updates, prefix=keys, on_error="closed")
        connection = client(redis_url)
        final = {"hot": connection.hget(f"{keys}hot", "d")}
        assert connection.hget(f"{keys}hot", "q") is None  # every writer left the queue
        connection.close()
        found = records(final["hot"])
        assert len(found) == WORKERS * updates
        for worker in range(WORKERS):
            assert [n for w, n in found if w == worker] == list(range(updates))
        check_commit_order(final, committed)
        if sum(1 for before, after in itertools.pairwise(found) if before[0] != after[0]) > 40:
            return
    raise AssertionError("the processes never wrote in turn in 3 runs")


def test_two_processes_on_distinct_and_shared_keys_lose_no_update(redis_url: str, prefix: str) -> None:
    keys = ["a", "b", "c"]
    committed, _ = run_workers(redis_url, keys, workers=2, count=UPDATES, prefix=prefix, **OPTIONS)
    connection = client(redis_url)
    final = {key: connection.hget(f"{prefix}{key}", "d") for key in keys}
    connection.close()
    for key in keys:
        found = records(final[key])
        assert len(found) == 2 * UPDATES // len(keys)
        for worker in (0, 1):
            assert [n for w, n in found if w == worker] == list(range(keys.index(key), UPDATES, len(keys)))
    check_commit_order(final, committed)
