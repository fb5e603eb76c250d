"""RedisStore when Redis goes away: killed mid-run and restarted empty, or up but never
answering. Fail-open: no exception reaches the caller, one warning per outage, one info record
when it ends, and the shared state carries on in Redis. Fail-closed: StoreUnavailable."""

from __future__ import annotations

import logging
import socket
import threading
import time
from typing import Any, Callable, Dict, Iterator, List, Optional

import pytest

from doomloop.gateway import RedisStore, StoreUnavailable
from redis_helpers import RECORD, RedisServer, client, records


def append(n: int) -> Callable[[Optional[bytes]], bytes]:
    return lambda data: (data or b"") + RECORD.pack(0, n)


def outage_records(caplog: pytest.LogCaptureFixture, level: int) -> List[logging.LogRecord]:
    return [record for record in caplog.records if record.name == "doomloop" and record.levelno == level]


def wait_for(condition: Callable[[], bool], seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_fail_open_rides_out_a_restart_and_the_state_carries_on(
    private_redis: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    store = RedisStore(private_redis.url, timeout=0.2)
    errors: List[BaseException] = []
    done = threading.Event()
    count = 0

    def serve() -> None:
        # A gateway thread serving one session's hooks while Redis goes down and comes back.
        nonlocal count
        try:
            while not done.is_set():
                store.update("s", append(count), 60)
                count += 1
                time.sleep(0.001)
        except BaseException as error:  # noqa: BLE001 -- any exception that reaches the caller fails the test
            errors.append(error)

    with caplog.at_level(logging.INFO, logger="doomloop"):
        thread = threading.Thread(target=serve)
        thread.start()
        wait_for(lambda: count > 50)
        private_redis.kill()
        wait_for(lambda: len(outage_records(caplog, logging.WARNING)) == 1)
        before_restart = count
        wait_for(lambda: count > before_restart + 50)  # served locally meanwhile
        private_redis.start()  # on the same port, with no data
        wait_for(lambda: len(outage_records(caplog, logging.INFO)) == 1)
        after_restart = count
        wait_for(lambda: count > after_restart + 50)
        done.set()
        thread.join()
    assert errors == []
    (warning,) = outage_records(caplog, logging.WARNING)
    assert "is unavailable" in warning.getMessage() and "served from local state" in warning.getMessage()
    assert warning.session_key == "s"  # type: ignore[attr-defined]
    (back,) = outage_records(caplog, logging.INFO)
    assert back.missed_calls > 0 and back.outage_seconds > 0  # type: ignore[attr-defined]
    # Redis came back empty; the updates this process made meanwhile were written back, and
    # every update since went to Redis: the key holds all of them, in order.
    connection = client(private_redis.url)
    assert records(connection.hget("doomloop:s", "d")) == [(0, n) for n in range(count)]
    connection.close()
    store.close()


def test_fail_closed_raises_during_an_outage_and_recovers(private_redis: RedisServer, caplog: pytest.LogCaptureFixture) -> None:
    store = RedisStore(private_redis.url, timeout=0.2, on_error="closed")
    store.update("s", append(0), 60)
    private_redis.kill()
    with caplog.at_level(logging.INFO, logger="doomloop"):
        with pytest.raises(StoreUnavailable, match="is unavailable: ConnectionError") as first:
            store.update("s", append(1), 60)
        assert first.value.__cause__ is not None
        # Within the backoff, calls fail at once, without touching the network.
        for call in (lambda: store.update("s", append(1), 60), lambda: store.load("s"), lambda: store.delete("s")):
            with pytest.raises(StoreUnavailable, match="next attempt in"):
                call()
        private_redis.start()

        def recovered() -> bool:
            try:
                store.update("s", append(2), 60)
            except StoreUnavailable:
                return False
            return True

        wait_for(recovered)
    assert len(outage_records(caplog, logging.WARNING)) == 1
    assert len(outage_records(caplog, logging.INFO)) == 1
    # Redis lost the key, and this store kept nothing it could not write: the state restarts.
    entry = store.load("s")
    assert entry is not None and records(entry.data) == [(0, 2)]
    store.close()


@pytest.fixture
def silent_server() -> Iterator[Any]:
    """A TCP server that accepts connections and never answers: a Redis too slow to use.
    Yields (url, a function returning how many connections it accepted)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    accepted: List[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.05)
        while not stop.is_set():
            try:
                accepted.append(listener.accept()[0])
            except TimeoutError:
                continue

    thread = threading.Thread(target=accept)
    thread.start()
    yield f"redis://127.0.0.1:{listener.getsockname()[1]}/0", lambda: len(accepted)
    stop.set()
    thread.join()
    for connection in accepted:
        connection.close()
    listener.close()


def test_a_slow_server_costs_one_probe_per_backoff_not_a_timeout_per_call(
    silent_server: Any, caplog: pytest.LogCaptureFixture
) -> None:
    url, connections = silent_server
    store = RedisStore(url, timeout=0.2)
    lengths: Dict[str, List[int]] = {f"s{n}": [] for n in range(4)}

    def serve(key: str) -> None:
        deadline = time.monotonic() + 1.5
        while time.monotonic() < deadline:
            lengths[key].append(len(store.update(key, lambda data: (data or b"") + b"x", 60)))
            time.sleep(0.002)

    with caplog.at_level(logging.INFO, logger="doomloop"):
        threads = [threading.Thread(target=serve, args=(key,)) for key in lengths]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    # Each session went on from its local copy, one update per call.
    for grown in lengths.values():
        assert grown == list(range(1, len(grown) + 1))
    calls = sum(len(grown) for grown in lengths.values())
    # Backoff 0.1, 0.2, 0.4, 0.8 s between probes, each a new connection that times out: a
    # handful in 1.5 s, however many calls were made meanwhile (hundreds, on an idle machine).
    assert connections() <= 10 < calls
    assert len(outage_records(caplog, logging.WARNING)) == 1
    assert outage_records(caplog, logging.INFO) == []
    store.close()


def test_a_delete_during_an_outage_drops_the_local_copy(private_redis: RedisServer) -> None:
    store = RedisStore(private_redis.url, timeout=0.2)
    store.update("s", append(0), 60)
    private_redis.kill()
    assert store.load("s") is not None  # the local copy
    store.delete("s")
    assert store.load("s") is None
    assert store.update("s", append(1), 60) == RECORD.pack(0, 1)
    store.close()


def test_compare_and_set_raises_during_an_outage_under_fail_open_too(private_redis: RedisServer) -> None:
    store = RedisStore(private_redis.url, timeout=0.2)
    private_redis.kill()
    with pytest.raises(StoreUnavailable):
        store.compare_and_set("s", None, b"x", 60)
    with pytest.raises(StoreUnavailable, match="next attempt in"):
        store.compare_and_set("s", None, b"x", 60)
    store.close()
