"""The Redis stores on a Redis Cluster (``cluster=True``): a private three-node cluster started
for these tests. Each script touches one key, so it runs on that key's node; sessions spread
over every node, and replicas share them as on one server. Under ``DOOMLOOP_REQUIRE_REDIS=1``
(CI) a missing redis-server fails these tests."""

from __future__ import annotations

import asyncio
from typing import Iterator, Set

import pytest

from doomloop import ConfigError
from doomloop.gateway import AsyncRedisStore, RedisStore, SessionRegistry
from redis_helpers import RedisCluster

KEYS = [f"session-{n}" for n in range(60)]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisCluster]:
    running = RedisCluster(str(tmp_path_factory.mktemp("cluster")))
    running.start()
    try:
        yield running
    finally:
        running.kill()


def nodes_holding(cluster: RedisCluster, prefix: str) -> Set[int]:
    import redis

    held = set()
    for port in cluster.ports:
        node = redis.Redis(port=port, socket_timeout=5)
        # SCAN on one node lists that node's keys only.
        if any(True for _ in node.scan_iter(match=f"{prefix}*", count=1000)):
            held.add(port)
        node.close()
    return held


def test_sessions_spread_over_every_node_and_read_back(cluster: RedisCluster, prefix: str) -> None:
    with RedisStore(cluster.url, prefix=prefix, cluster=True, timeout=5, on_error="closed") as store:
        for key in KEYS:
            for _ in range(3):
                store.update(key, lambda blob: (blob or b"") + b".", ttl_seconds=60)
        assert all(store.load(key).data == b"..." for key in KEYS)  # type: ignore[union-attr]
        assert nodes_holding(cluster, prefix) == set(cluster.ports)
        store.delete(KEYS[0])
        assert store.load(KEYS[0]) is None


def test_two_replicas_share_a_session_through_the_cluster(cluster: RedisCluster, prefix: str) -> None:
    stores = [RedisStore(cluster.url, prefix=prefix, cluster=True, timeout=5, on_error="closed") for _ in range(2)]
    first, second = (SessionRegistry(store=store) for store in stores)
    for _ in range(10):
        first.before_tool_call("k", "exec", {"command": "ls"})
        first.after_tool_call("k", "exec", {"command": "ls"}, result="same")
    decision = second.before_tool_call("k", "exec", {"command": "ls"})
    assert decision.emit_warning and decision.verdict.count == 10
    for store in stores:
        store.close()


def test_the_async_store_on_the_cluster(cluster: RedisCluster, prefix: str) -> None:
    async def main() -> None:
        async with AsyncRedisStore(cluster.url, prefix=prefix, cluster=True, timeout=5, on_error="closed") as store:
            for key in KEYS[:20]:
                assert await store.update(key, lambda blob: (blob or b"") + b"a", ttl_seconds=60) == b"a"
                assert await store.update(key, lambda blob: (blob or b"") + b"b", ttl_seconds=60) == b"ab"
            entry = await store.load(KEYS[3])
            assert entry is not None and entry.data == b"ab"

    asyncio.run(main())


@pytest.mark.parametrize("url", ["unix:///tmp/redis.sock", "redis://127.0.0.1:6379/2"])
def test_cluster_urls_that_cannot_name_a_cluster(url: str) -> None:
    for store in (RedisStore, AsyncRedisStore):
        with pytest.raises(ConfigError, match="Cluster"):
            store(url, cluster=True)
    with pytest.raises(TypeError, match="cluster must be a bool"):
        RedisStore("redis://127.0.0.1:6379/0", cluster="yes")  # type: ignore[arg-type]


def test_every_script_touches_one_key() -> None:
    # A cluster runs a script on the node of its keys: one key per script, always.
    from doomloop.gateway import redis_store

    for script in (redis_store._CAS, redis_store._LOAD):
        assert "KEYS[1]" in script and "KEYS[2]" not in script
