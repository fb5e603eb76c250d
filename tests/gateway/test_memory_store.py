"""MemoryStore: compare-and-set and update semantics, TTL expiry and the bound it gives, versions
never reused, and threads hammering one key with no update lost."""

from __future__ import annotations

import threading
from typing import Callable, List, Optional

import pytest

from doomloop.gateway import Entry, MemoryStore, Store
from doomloop.gateway.store import _OPTIMISTIC_ATTEMPTS
from redis_helpers import RECORD, records
from support import FakeClock


def append(record: bytes) -> Callable[[Optional[bytes]], bytes]:
    return lambda data: (data or b"") + record


def test_a_memory_store_is_a_store() -> None:
    store: Store = MemoryStore()
    assert store.load("s") is None


def test_compare_and_set_creates_then_needs_the_current_version() -> None:
    store = MemoryStore()
    assert store.compare_and_set("s", 1, b"a", 10) is None  # no entry at version 1
    first = store.compare_and_set("s", None, b"a", 10)
    assert first is not None and store.load("s") == Entry(first, b"a")
    assert store.compare_and_set("s", None, b"b", 10) is None  # it exists now
    assert store.compare_and_set("s", first + 1, b"b", 10) is None
    second = store.compare_and_set("s", first, b"b", 10)
    assert second is not None and second > first
    assert store.load("s") == Entry(second, b"b")


def test_str_and_bytes_keys_are_one_key() -> None:
    store = MemoryStore()
    store.compare_and_set("sé", None, b"a", 10)
    assert store.load("sé".encode()) == store.load("sé")


def test_a_deleted_key_never_gets_an_old_version_back() -> None:
    store = MemoryStore()
    old = store.compare_and_set("s", None, b"a", 10)
    store.delete("s")
    assert store.load("s") is None
    new = store.compare_and_set("s", None, b"b", 10)
    assert new is not None and old is not None and new > old
    assert store.compare_and_set("s", old, b"stale writer", 10) is None
    store.delete("never-written")  # nothing happens


def test_update_applies_fn_to_the_current_blob() -> None:
    store = MemoryStore()
    seen: List[Optional[bytes]] = []

    def fn(data: Optional[bytes]) -> bytes:
        seen.append(data)
        return (data or b"") + b"x"

    assert store.update("s", fn, 10) == b"x"
    assert store.update("s", fn, 10) == b"xx"
    assert seen == [None, b"x"]
    entry = store.load("s")
    assert entry is not None and entry.data == b"xx"


def test_update_refuses_a_result_that_is_not_bytes_and_keeps_the_entry() -> None:
    store = MemoryStore()
    store.update("s", append(b"a"), 10)
    with pytest.raises(TypeError, match="must be bytes, got bytearray"):
        store.update("s", lambda data: bytearray(b"b"), 10)  # type: ignore[arg-type, return-value]
    with pytest.raises(ZeroDivisionError):
        store.update("s", lambda data: bytes(1 // 0), 10)
    entry = store.load("s")
    assert entry is not None and entry.data == b"a"


def test_entries_expire_after_their_ttl_from_the_last_write() -> None:
    clock = FakeClock(100.0)
    store = MemoryStore(clock=clock)
    store.update("s", append(b"a"), 1.0)
    clock.now = 100.9
    store.update("s", append(b"b"), 1.0)  # restarts the TTL
    clock.now = 101.8
    entry = store.load("s")
    assert entry is not None and entry.data == b"ab"
    clock.now = 101.9
    assert store.load("s") is None
    # An expired entry is no entry: it cannot be compare-and-set at its old version.
    assert store.update("s", append(b"c"), 1.0) == b"c"


def test_expired_entries_are_dropped_so_the_store_stays_bounded() -> None:
    clock = FakeClock(0.0)
    store = MemoryStore(clock=clock)
    for n in range(1000):
        store.compare_and_set(f"s{n}", None, b"x", 1.0)
    assert len(store) == 1000
    clock.now = 1.5
    store.compare_and_set("fresh", None, b"x", 1.0)
    assert len(store) == 1


def test_threads_hammering_one_key_lose_no_update() -> None:
    store = MemoryStore()
    threads, count = 8, 2000
    barrier = threading.Barrier(threads)

    def work(worker: int) -> None:
        barrier.wait()
        for n in range(count):
            store.update("hot", append(RECORD.pack(worker, n)), 60)

    pool = [threading.Thread(target=work, args=(worker,)) for worker in range(threads)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()
    entry = store.load("hot")
    assert entry is not None
    found = records(entry.data)
    assert len(found) == threads * count
    for worker in range(threads):
        assert [n for w, n in found if w == worker] == list(range(count))


def test_update_under_contention_still_completes_and_loses_nothing() -> None:
    # Another thread's update gets in before each optimistic attempt; the last attempt, under
    # the store's lock, cannot lose. Every update is in the blob.
    store = MemoryStore()
    calls = 0

    def fn(data: Optional[bytes]) -> bytes:
        nonlocal calls
        calls += 1
        if calls <= _OPTIMISTIC_ATTEMPTS:
            rival = threading.Thread(target=store.update, args=("s", append(b"r"), 10))
            rival.start()
            rival.join()
        return (data or b"") + b"m"

    assert store.update("s", fn, 10) == b"r" * _OPTIMISTIC_ATTEMPTS + b"m"
    assert calls == _OPTIMISTIC_ATTEMPTS + 1
