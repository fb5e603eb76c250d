"""RedisStore against a real server: compare-and-set and update semantics, the key's layout
and TTL, one round trip per update in the common path, conflicts answered in the same reply,
contention, and corrupt entries under both policies."""

from __future__ import annotations

import logging
import re
import threading
import time
from typing import Any, Callable, Iterator, Optional

import pytest

from doomloop.gateway import Entry, RedisStore, Store, StoreCorrupt, StoreUnavailable
from redis_helpers import RECORD, RedisServer, calls, client, made_since, records


def append(record: bytes) -> Callable[[Optional[bytes]], bytes]:
    return lambda data: (data or b"") + record


@pytest.fixture
def store(redis_url: str, prefix: str) -> Iterator[RedisStore]:
    with RedisStore(redis_url, prefix=prefix) as opened:
        yield opened


def test_compare_and_set_creates_then_needs_the_current_version(store: RedisStore) -> None:
    typed: Store = store
    assert typed.load("s") is None
    assert store.compare_and_set("s", 1, b"a", 10) is None
    first = store.compare_and_set("s", None, b"a", 10)
    assert first is not None and first > 0 and store.load("s") == Entry(first, b"a")
    assert store.compare_and_set("s", None, b"b", 10) is None
    assert store.compare_and_set("s", first + 1, b"b", 10) is None
    assert store.compare_and_set("s", first, b"b", 10) == first + 1
    assert store.load(b"s") == Entry(first + 1, b"b")
    store.delete("s")
    assert store.load("s") is None
    store.delete("s")  # nothing happens


def test_one_hash_per_session_with_its_ttl_restarted_on_every_write(store: RedisStore, raw: Any, prefix: str) -> None:
    store.update("s", append(b"\x00\xffbinary"), 30)
    entry = store.load("s")
    assert entry is not None
    assert raw.hgetall(f"{prefix}s") == {b"v": str(entry.version).encode(), b"d": b"\x00\xffbinary"}
    assert 29_000 < raw.pttl(f"{prefix}s") <= 30_000
    raw.pexpire(f"{prefix}s", 5_000)
    store.update("s", append(b"!"), 30)
    assert 29_000 < raw.pttl(f"{prefix}s") <= 30_000
    assert raw.keys(f"{prefix}*") == [f"{prefix}s".encode()]


def test_an_entry_is_gone_when_its_ttl_ends(store: RedisStore, raw: Any, prefix: str) -> None:
    store.update("s", append(b"a"), 1)
    store.update("short", append(b"a"), 0.2)  # PEXPIRE: milliseconds
    assert 0 < raw.pttl(f"{prefix}short") <= 200
    deadline = time.monotonic() + 5
    while raw.exists(f"{prefix}s") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not raw.exists(f"{prefix}s") and not raw.exists(f"{prefix}short")
    assert store.load("s") is None
    # The local copy expired with it: the next update starts from nothing.
    assert store.update("s", append(b"b"), 1) == b"b"


def test_an_update_is_one_round_trip_when_this_store_wrote_the_key_last() -> None:
    server = RedisServer()
    server.start()
    try:
        connection = client(server.url)
        with RedisStore(server.url) as store:
            store.update("s", append(b"x"), 60)  # the first call loads the script
            before = calls(connection)
            for _ in range(200):
                store.update("s", append(b"x"), 60)
            assert made_since(before, connection) == {"evalsha": 200}
        connection.close()
    finally:
        server.kill()


def test_a_conflict_reply_carries_the_winner_so_the_retry_needs_no_read(redis_url: str, prefix: str, raw: Any) -> None:
    with RedisStore(redis_url, prefix=prefix) as one, RedisStore(redis_url, prefix=prefix) as two:
        one.update("s", append(b"1"), 60)
        two.update("s", append(b"2"), 60)
        before = calls(raw)
        # Each store's copy is stale after the other wrote: a conflict, then a commit.
        assert one.update("s", append(b"1"), 60) == b"121"
        assert two.update("s", append(b"2"), 60) == b"1212"
        assert made_since(before, raw) == {"evalsha": 4}


def test_a_writer_holding_a_deleted_entrys_version_conflicts_with_its_successor(redis_url: str, prefix: str) -> None:
    with RedisStore(redis_url, prefix=prefix) as one, RedisStore(redis_url, prefix=prefix) as two:
        one.update("s", append(b"old"), 60)
        stale = one.load("s")
        two.delete("s")
        for _ in range(3):
            two.update("s", append(b"+"), 60)
        assert stale is not None and one.compare_and_set("s", stale.version, b"stale", 60) is None
        assert one.update("s", append(b"!"), 60) == b"+++!"


def test_contention_past_the_retries_fails_closed(redis_url: str, prefix: str) -> None:
    with (
        RedisStore(redis_url, prefix=prefix, retries=0, on_error="closed") as one,
        RedisStore(redis_url, prefix=prefix) as two,
    ):
        one.update("s", append(b"1"), 60)
        two.update("s", append(b"2"), 60)
        with pytest.raises(StoreUnavailable, match="1 attempts all lost to other writers"):
            one.update("s", append(b"1"), 60)
        assert two.load("s") == one.load("s")
        assert one.update("s", append(b"1"), 60) == b"121"  # the conflict brought the winner


def test_contention_past_the_retries_fails_open_and_the_update_follows(
    redis_url: str, prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    with RedisStore(redis_url, prefix=prefix, retries=0) as one, RedisStore(redis_url, prefix=prefix) as two:
        one.update("s", append(b"1"), 60)
        two.update("s", append(b"2"), 60)
        with caplog.at_level(logging.WARNING, logger="doomloop"):
            assert one.update("s", append(b"a"), 60) == b"12a"  # served locally
        (record,) = caplog.records
        assert "lost 1 attempts in a row" in record.getMessage() and record.session_key == "s"  # type: ignore[attr-defined]
        # The next update builds on the local copy, whose base is still current: both land.
        assert one.update("s", append(b"b"), 60) == b"12ab"
        assert two.update("s", append(b"3"), 60) == b"12ab3"


def server_ms(raw: Any) -> int:
    seconds, micros = raw.time()
    return int(seconds) * 1000 + int(micros) // 1000


def test_a_writer_that_loses_twice_queues_and_then_only_it_may_write(redis_url: str, prefix: str, raw: Any) -> None:
    with RedisStore(redis_url, prefix=prefix) as one, RedisStore(redis_url, prefix=prefix) as two:
        one.update("s", append(b"1"), 60)
        seen = []

        def fn(data: Optional[bytes]) -> bytes:
            # Each of one's first three attempts loses to a write of two's; the third loss puts
            # one in the queue (it queues once it has lost twice), at its head.
            seen.append(data)
            if len(seen) <= 3:
                two.update("s", append(b"2"), 60)
            elif len(seen) == 4:
                queue = raw.hget(f"{prefix}s", "q")
                assert queue is not None and queue.startswith(one._core._token + b":")
                # While one heads the queue, two's writes are refused: compare_and_set says
                # so as a conflict, and writes nothing.
                entry = two.load("s")
                assert entry is not None and two.compare_and_set("s", entry.version, b"x", 60) is None
                assert raw.hget(f"{prefix}s", "d") == b"1222"
            return (data or b"") + b"1"

        assert one.update("s", fn, 60) == b"12221"
        assert seen == [b"1", b"12", b"122", b"1222"]
        assert raw.hget(f"{prefix}s", "q") is None  # its write took it out of the queue
        assert two.update("s", append(b"2"), 60) == b"122212"


def test_a_writer_waits_for_the_queue_and_one_not_heard_from_for_a_lease_is_dropped(
    redis_url: str, prefix: str, raw: Any
) -> None:
    # timeout 0.1 s: a lease of 0.2 s. A queued writer that never calls again (a dead process)
    # holds the key until its lease ends; the store's update waits that long, then writes.
    with RedisStore(redis_url, prefix=prefix, timeout=0.1) as store:
        store.update("s", append(b"a"), 60)
        raw.hset(f"{prefix}s", "q", f"0123abcd:{server_ms(raw)}")
        began = time.monotonic()
        assert store.update("s", append(b"b"), 60) == b"ab"
        assert time.monotonic() - began >= 0.15
        assert raw.hget(f"{prefix}s", "q") is None


def test_a_wait_for_the_queue_past_its_bound_fails_closed(
    redis_url: str, prefix: str, raw: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from doomloop.gateway import redis_store

    monkeypatch.setattr(redis_store, "_MAX_WAIT", 0.05)
    with RedisStore(redis_url, prefix=prefix, on_error="closed") as store:
        store.update("s", append(b"a"), 60)
        raw.hset(f"{prefix}s", "q", f"0123abcd:{server_ms(raw)}")  # fresh for a lease of 1 s
        with pytest.raises(StoreUnavailable, match=r"waited over 0.05 s for its turn behind other writers"):
            store.update("s", append(b"b"), 60)
        assert raw.hget(f"{prefix}s", "d") == b"a"


def test_an_entry_with_an_earlier_releases_contention_mark_is_read_and_the_mark_dropped(
    store: RedisStore, raw: Any, prefix: str
) -> None:
    store.update("s", append(b"a"), 60)
    raw.hset(f"{prefix}s", "c", "1")
    assert store.load("s") is not None
    assert store.update("s", append(b"b"), 60) == b"ab"
    assert sorted(raw.hkeys(f"{prefix}s")) == [b"d", b"v"]


def test_update_checks_fn_and_the_key(store: RedisStore) -> None:
    store.update("s", append(b"a"), 10)
    with pytest.raises(TypeError, match="must be bytes, got str"):
        store.update("s", lambda data: "text", 10)  # type: ignore[arg-type, return-value]
    with pytest.raises(ValueError, match="at most 1024 bytes"):
        store.update("k" * 1025, append(b"a"), 10)
    with pytest.raises(ValueError, match="ttl_seconds"):
        store.update("s", append(b"a"), 0)
    entry = store.load("s")
    assert entry is not None and entry.data == b"a"


CORRUPTIONS = {
    "a string": (lambda raw, key: raw.set(key, b"junk"), "the key holds a string, not a hash"),
    "a list": (lambda raw, key: raw.rpush(key, b"junk"), "the key holds a list, not a hash"),
    "a bad version": (lambda raw, key: raw.hset(key, mapping={"v": "12x", "d": "a"}), "the version is not a positive integer"),
    "a zero version": (lambda raw, key: raw.hset(key, mapping={"v": "0", "d": "a"}), "the version is not a positive integer"),
    "a huge version": (lambda raw, key: raw.hset(key, mapping={"v": "9" * 40, "d": "a"}), "below 2^53"),
    "no data": (lambda raw, key: raw.hset(key, mapping={"v": "5"}), "exactly the fields v and d"),
    "an extra field": (lambda raw, key: raw.hset(key, mapping={"v": "5", "d": "a", "x": "1"}), "exactly the fields v and d"),
}


@pytest.mark.parametrize("corruption", list(CORRUPTIONS))
def test_a_corrupt_entry_is_logged_and_overwritten_under_fail_open(
    corruption: str, store: RedisStore, raw: Any, prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    tamper, problem = CORRUPTIONS[corruption]
    tamper(raw, f"{prefix}s")
    with caplog.at_level(logging.WARNING, logger="doomloop"):
        assert store.load("s") is None
        assert store.update("s", append(b"fresh"), 60) == b"fresh"
    assert [record.session_key for record in caplog.records] == ["s", "s"]  # type: ignore[attr-defined]
    assert all(problem in record.getMessage() for record in caplog.records)
    entry = store.load("s")
    assert entry is not None and entry.data == b"fresh"
    assert set(raw.hgetall(f"{prefix}s")) == {b"v", b"d"}


@pytest.mark.parametrize("corruption", list(CORRUPTIONS))
def test_a_corrupt_entry_raises_under_fail_closed_and_stays(corruption: str, redis_url: str, raw: Any, prefix: str) -> None:
    tamper, problem = CORRUPTIONS[corruption]
    tamper(raw, f"{prefix}s")
    before = raw.dump(f"{prefix}s")
    with RedisStore(redis_url, prefix=prefix, on_error="closed") as store:
        for call in (
            lambda: store.load("s"),
            lambda: store.update("s", append(b"x"), 60),
            lambda: store.compare_and_set("s", None, b"x", 60),
        ):
            with pytest.raises(StoreCorrupt, match=re.escape(problem)):
                call()
    assert raw.dump(f"{prefix}s") == before


def test_compare_and_set_raises_on_a_corrupt_entry_under_fail_open_too(store: RedisStore, raw: Any, prefix: str) -> None:
    raw.set(f"{prefix}s", b"junk")
    with pytest.raises(StoreCorrupt):
        store.compare_and_set("s", None, b"x", 60)


def test_threads_of_one_store_take_turns_on_a_key_and_never_conflict(store: RedisStore, raw: Any) -> None:
    threads, count = 8, 200
    store.update("hot", append(b""), 60)
    barrier = threading.Barrier(threads)

    def work(worker: int) -> None:
        barrier.wait()
        for n in range(count):
            store.update("hot", append(RECORD.pack(worker, n)), 60)

    before = calls(raw)
    pool = [threading.Thread(target=work, args=(worker,)) for worker in range(threads)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()
    assert made_since(before, raw) == {"evalsha": threads * count}
    entry = store.load("hot")
    assert entry is not None
    found = records(entry.data)
    assert len(found) == threads * count
    for worker in range(threads):
        assert [n for w, n in found if w == worker] == list(range(count))


def test_a_corrupt_entry_is_overwritten_even_with_no_retries(redis_url: str, raw: Any, prefix: str) -> None:
    raw.set(f"{prefix}s", b"junk")
    with RedisStore(redis_url, prefix=prefix, retries=0) as store:
        assert store.update("s", append(b"fresh"), 60) == b"fresh"
    assert raw.hget(f"{prefix}s", "d") == b"fresh"
