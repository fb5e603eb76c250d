"""Redis for the gateway tests and benchmarks: the server they run against, private servers a
test can kill and restart, and the worker processes of the multi-process tests.

The tests use ``DOOMLOOP_REDIS_URL`` when it is set; otherwise they start a private
``redis-server`` (no persistence, loopback only) when the binary is installed. With
``DOOMLOOP_REQUIRE_REDIS=1`` (as ``.ci/run`` sets) a missing server or client fails the tests;
without it, they skip.
"""

from __future__ import annotations

import contextlib
import hashlib
import multiprocessing
import os
import queue
import shutil
import socket
import struct
import subprocess
import time
from typing import Any, Dict, Iterator, List, NoReturn, Optional, Sequence, Tuple

import pytest

REQUIRED = os.environ.get("DOOMLOOP_REQUIRE_REDIS") == "1"

# One update's record in the test blobs: (worker, sequence number), appended.
RECORD = struct.Struct(">II")


def unavailable(reason: str) -> NoReturn:
    """Fail under ``DOOMLOOP_REQUIRE_REDIS=1``, skip otherwise."""
    if REQUIRED:
        pytest.fail(f"{reason} (DOOMLOOP_REQUIRE_REDIS=1: Redis tests must run)")
    pytest.skip(reason)


def client(url: str) -> Any:
    """A plain redis-py client for inspecting and tampering with keys."""
    try:
        import redis
    except ImportError:
        unavailable("redis-py is not installed")
    return redis.Redis.from_url(url, socket_timeout=5)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class RedisServer:
    """A private ``redis-server`` on a free loopback port, without persistence, that a test can
    kill and start again on the same port (with no data, as a crashed server comes back)."""

    def __init__(self) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            unavailable("redis-server is not installed (apt-get install redis-server)")
        self.binary = binary
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self._process: Optional[subprocess.Popen[bytes]] = None

    def start(self) -> None:
        command = [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
        self._process = subprocess.Popen([*command, "--loglevel", "warning"], stdout=subprocess.DEVNULL)
        probe = client(self.url)
        deadline = time.monotonic() + 10
        while True:
            try:
                probe.ping()
                break
            except Exception:  # noqa: BLE001 -- not up yet, whatever the error
                if time.monotonic() > deadline or self._process.poll() is not None:
                    self.kill()
                    pytest.fail(f"redis-server did not start on port {self.port}")
                time.sleep(0.02)
        probe.close()

    def kill(self) -> None:
        """Stop the server at once (SIGKILL), as a crash would."""
        if self._process is not None:
            self._process.kill()
            self._process.wait()
            self._process = None


class RedisCluster:
    """A private three-node Redis Cluster (three primaries, no replicas, all 16,384 slots) on
    free loopback ports, each node in a folder of its own, without persistence."""

    def __init__(self, folder: str) -> None:
        binary, cli = shutil.which("redis-server"), shutil.which("redis-cli")
        if binary is None or cli is None:
            unavailable("redis-server and redis-cli are not installed (apt-get install redis-server)")
        self.binary, self.cli = binary, cli
        self.folder = folder
        self.ports = [free_port() for _ in range(3)]
        # Each node's cluster bus on a free port of its own (by default it is the port plus
        # 10,000, past 65,535 for a high free port).
        self.bus_ports = [free_port() for _ in range(3)]
        self.url = f"redis://127.0.0.1:{self.ports[0]}/0"
        self._processes: List[subprocess.Popen[bytes]] = []

    def start(self) -> None:
        for port, bus in zip(self.ports, self.bus_ports, strict=True):
            node = os.path.join(self.folder, str(port))
            os.makedirs(node, exist_ok=True)
            command = [self.binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
            command += ["--cluster-enabled", "yes", "--cluster-port", str(bus), "--cluster-config-file", "nodes.conf"]
            command += ["--loglevel", "warning"]
            self._processes.append(subprocess.Popen(command, cwd=node, stdout=subprocess.DEVNULL))
        for port in self.ports:
            self._wait(port, b"PONG", "ping")
        nodes = [f"127.0.0.1:{port}" for port in self.ports]
        create = [self.cli, "--cluster", "create", *nodes, "--cluster-replicas", "0", "--cluster-yes"]
        made = subprocess.run(create, capture_output=True, timeout=60)
        if made.returncode != 0:
            self.kill()
            pytest.fail(f"redis-cli --cluster create failed: {made.stdout.decode()[-2000:]}{made.stderr.decode()[-2000:]}")
        for port in self.ports:
            self._wait(port, b"cluster_state:ok", "cluster", "info")

    def _wait(self, port: int, expected: bytes, *command: str) -> None:
        deadline = time.monotonic() + 30
        while True:
            probe = subprocess.run([self.cli, "-p", str(port), *command], capture_output=True, timeout=10)
            if expected in probe.stdout:
                return
            if time.monotonic() > deadline:
                self.kill()
                pytest.fail(f"the cluster node on port {port} did not answer {expected!r} to {' '.join(command)}")
            time.sleep(0.05)

    def kill(self) -> None:
        for process in self._processes:
            process.kill()
            process.wait()
        self._processes = []


@contextlib.contextmanager
def server_url() -> Iterator[str]:
    """The URL the tests run against: ``DOOMLOOP_REDIS_URL``, or a private server's."""
    url = os.environ.get("DOOMLOOP_REDIS_URL")
    if url:
        probe = client(url)
        try:
            probe.ping()
        except Exception as error:  # noqa: BLE001 -- any failure means the server is not usable
            unavailable(f"DOOMLOOP_REDIS_URL does not answer: {error}")
        finally:
            probe.close()
        yield url
        return
    server = RedisServer()
    server.start()
    try:
        yield server.url
    finally:
        server.kill()


# The commands the stores' scripts run inside Redis: INFO commandstats counts them too, but they
# are no round trips.
IN_SCRIPTS = {"type", "hmget", "hget", "hexists", "hlen", "hset", "hdel", "pexpire", "del", "time"}


def calls(connection: Any) -> Dict[str, int]:
    """Calls per command a client sent since the server started (INFO commandstats)."""
    stats = connection.info("commandstats")
    counts = {name.removeprefix("cmdstat_"): int(entry["calls"]) for name, entry in stats.items()}
    return {name: count for name, count in counts.items() if name not in IN_SCRIPTS}


def made_since(before: Dict[str, int], connection: Any) -> Dict[str, int]:
    """The commands called since ``before`` was taken, the INFO calls that measure them aside."""
    after = calls(connection)
    made = {name: count - before.get(name, 0) for name, count in after.items() if count != before.get(name, 0)}
    made["info"] = made.get("info", 0) - 1
    return {name: count for name, count in made.items() if count}


def records(blob: bytes) -> List[Tuple[int, int]]:
    """The (worker, sequence number) records of a test blob."""
    return [RECORD.unpack_from(blob, offset) for offset in range(0, len(blob), RECORD.size)]


def append_worker(store: Any, keys: Sequence[str], worker: int, count: int) -> List[Tuple[str, int, bytes]]:
    """``count`` updates that each append (worker, n) to the blob of one key (round robin over
    ``keys``). Returns, per update, the key, the length and the digest of the blob the update
    committed: each must be a prefix of the key's final blob."""
    committed: List[Tuple[str, int, bytes]] = []
    for n in range(count):
        key = keys[n % len(keys)]
        record = RECORD.pack(worker, n)
        blob = store.update(key, lambda data, record=record: (data or b"") + record, 60)
        committed.append((key, len(blob), hashlib.blake2b(blob, digest_size=16).digest()))
    return committed


def count_worker(store: Any, keys: Sequence[str], worker: int, count: int) -> List[float]:
    """``count`` updates of ``keys[worker % len(keys)]`` (one key for all workers, or one
    each) that each add one to the counter heading its blob (see :func:`bump`). Returns the
    seconds each update took."""
    key = keys[worker % len(keys)]
    taken: List[float] = []
    for _ in range(count):
        began = time.perf_counter()
        store.update(key, bump, 60)
        taken.append(time.perf_counter() - began)
    return taken


def tool_call_worker(store: Any, keys: Sequence[str], worker: int, count: int) -> Tuple[List[float], List[float]]:
    """``count`` tool calls (``before_tool_call`` + ``after_tool_call``, fresh arguments and
    result each time, so no rule fires) through a ``SessionRegistry`` on ``store``, on the
    session ``keys[worker % len(keys)]`` (one key for all workers, or one each), or round robin
    over all of ``keys`` for worker -1 (one process, many sessions). Each is timed beside one
    raw ``EVALSHA`` round trip of a script that only returns, sent the bytes of one session's
    blob, to the same server. Every session has one untimed call first. Returns the seconds of
    each tool call and of each raw round trip."""
    import redis

    from doomloop.gateway import SessionRegistry

    mine = list(keys) if worker < 0 else [keys[worker % len(keys)]]
    registry = SessionRegistry(store=store)
    calls = iter(range(10**9))

    def tool_call(key: str) -> None:
        n = next(calls)
        registry.before_tool_call(key, "read", {"path": f"src/{n}.py"})
        registry.after_tool_call(key, "read", {"path": f"src/{n}.py"}, result=f"line {n}")

    for key in mine:
        tool_call(key)
    connection = redis.Redis.from_url(store._core.url)
    raw = connection.register_script("return 1")
    blob = registry.get(mine[0]).to_bytes()
    raw(keys=[b"raw"], args=[blob])
    tool_calls: List[float] = []
    round_trips: List[float] = []
    for n in range(count):
        began = time.perf_counter()
        raw(keys=[b"raw"], args=[blob])
        between = time.perf_counter()
        tool_call(mine[n % len(mine)])
        ended = time.perf_counter()
        round_trips.append(between - began)
        tool_calls.append(ended - between)
    connection.close()
    return tool_calls, round_trips


def counted(size: int, value: int = 0) -> bytes:
    """A blob of ``size`` bytes whose first 8 hold a counter."""
    return value.to_bytes(8, "big") + bytes(size - 8)


def bump(data: Optional[bytes]) -> bytes:
    """``data``'s counter plus one (a new blob of 4 KiB when there is none)."""
    if data is None:
        return counted(4096, 1)
    return (int.from_bytes(data[:8], "big") + 1).to_bytes(8, "big") + data[8:]


def _worker(job: Any, url: str, keys: Sequence[str], worker: int, count: int, start: Any, results: Any, options: Any) -> None:
    from doomloop.gateway import RedisStore

    store = RedisStore(url, **options)
    start.wait()
    began = time.perf_counter()
    result = job(store, keys, worker, count)
    elapsed = time.perf_counter() - began
    store.close()
    results.put((worker, result, elapsed))


def run_workers(
    url: str, keys: Sequence[str], workers: int, count: int, job: Any = append_worker, **store_options: Any
) -> Tuple[Dict[int, Any], float]:
    """Run ``job(store, keys, worker, count)`` in ``workers`` processes (spawned, so none shares
    a client), each with a RedisStore of ``store_options``, started together. Returns their
    results by worker, and the seconds the slowest took from the start."""
    context = multiprocessing.get_context("spawn")
    start = context.Barrier(workers + 1)
    results = context.Queue()
    processes = [
        context.Process(target=_worker, args=(job, url, keys, worker, count, start, results, store_options))
        for worker in range(workers)
    ]
    for process in processes:
        process.start()
    try:
        start.wait(timeout=120)
        collected: Dict[int, Any] = {}
        slowest = 0.0
        while len(collected) < workers:
            try:
                worker, result, elapsed = results.get(timeout=1)
            except queue.Empty:
                failed = [process.exitcode for process in processes if process.exitcode not in (None, 0)]
                assert not failed, f"a worker failed (exit codes {failed}); its traceback is in the captured stderr"
                continue
            collected[worker] = result
            slowest = max(slowest, elapsed)
        for process in processes:
            process.join(timeout=60)
            assert process.exitcode == 0, f"worker exited with {process.exitcode}"
        return collected, slowest
    finally:
        # A failed run leaves no worker behind (one blocked on the results queue would keep
        # the test session from exiting).
        for process in processes:
            if process.is_alive():
                process.kill()
                process.join()
