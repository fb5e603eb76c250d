"""Fixtures of the gateway store tests: the Redis server (see redis_helpers), a key prefix of
their own per test (so tests never see each other's keys, even on a shared server), and a
private server a test may kill."""

from __future__ import annotations

import uuid
from typing import Any, Iterator

import pytest

from redis_helpers import RedisServer, client, server_url


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    with server_url() as url:
        yield url


@pytest.fixture
def prefix() -> str:
    return f"doomloop-test:{uuid.uuid4().hex}:"


@pytest.fixture
def raw(redis_url: str) -> Iterator[Any]:
    """A plain redis-py client on the test server."""
    connection = client(redis_url)
    yield connection
    connection.close()


@pytest.fixture
def private_redis() -> Iterator[RedisServer]:
    """A running server of this test's own, which it may kill and start again."""
    server = RedisServer()
    server.start()
    yield server
    server.kill()
