"""What every store checks before it acts: session keys, TTLs, the Redis stores' options, and
that doomloop.gateway imports without redis-py. None of these need a Redis server."""

from __future__ import annotations

import subprocess
import sys
from typing import Any, Dict

import pytest

from doomloop.errors import ConfigError, DoomLoopError, StoreCorrupt, StoreUnavailable
from doomloop.gateway import MAX_KEY_BYTES, AsyncRedisStore, MemoryStore, RedisStore, check_session_key


def test_session_keys_are_str_or_bytes_of_bounded_length() -> None:
    assert check_session_key("sé") == "sé".encode()
    assert check_session_key(b"\xff\x00") == b"\xff\x00"
    assert check_session_key("x" * MAX_KEY_BYTES) == b"x" * MAX_KEY_BYTES
    with pytest.raises(ValueError, match=f"at most {MAX_KEY_BYTES} bytes"):
        check_session_key("é" * (MAX_KEY_BYTES // 2 + 1))  # counted in UTF-8 bytes
    with pytest.raises(ValueError, match="must not be empty"):
        check_session_key("")
    with pytest.raises(ValueError, match="lone surrogate"):
        check_session_key("a\ud800")
    for bad in (None, 1, bytearray(b"a"), ["a"]):
        with pytest.raises(TypeError, match="must be str or bytes"):
            check_session_key(bad)


def test_every_store_method_checks_its_key_and_ttl() -> None:
    store = MemoryStore()
    with pytest.raises(TypeError):
        store.load(1)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        store.delete(b"")
    for ttl in (0, -1, float("nan"), float("inf"), 1e10, 10**400):
        with pytest.raises(ConfigError, match="ttl_seconds"):
            store.update("s", lambda data: b"", ttl)
    for ttl in ("1", None, True):
        with pytest.raises(TypeError, match="ttl_seconds"):
            store.compare_and_set("s", None, b"", ttl)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="data must be bytes"):
        store.compare_and_set("s", None, "text", 1)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="expected_version"):
        store.compare_and_set("s", "1", b"", 1)  # type: ignore[arg-type]
    assert store.load("s") is None


@pytest.mark.parametrize("store_class", [RedisStore, AsyncRedisStore])
@pytest.mark.parametrize(
    ("options", "error", "message"),
    [
        (
            {"url": "ftp://127.0.0.1"},
            ConfigError,
            r"\.url: must start with redis://, rediss:// or unix://, got scheme 'ftp'",
        ),
        ({"url": "redis://:secret@127.0.0.1:port"}, ConfigError, r"\.url: is not a valid URL"),
        ({"url": "unix://"}, ConfigError, r"\.url: names no socket path"),
        ({"url": b"redis://127.0.0.1"}, TypeError, r"\.url must be a str"),
        ({"timeout": 0}, ConfigError, r"\.timeout: must be a positive, finite number"),
        ({"timeout": float("inf")}, ConfigError, r"\.timeout: must be a positive, finite number"),
        ({"timeout": float("nan")}, ConfigError, r"\.timeout"),
        ({"timeout": "1"}, TypeError, r"\.timeout must be a number"),
        ({"on_error": "ignore"}, ConfigError, r"\.on_error: must be 'open' or 'closed', got 'ignore'"),
        ({"on_error": None}, TypeError, r"\.on_error must be a str"),
        ({"prefix": b"p:"}, TypeError, r"\.prefix must be a str"),
        ({"retries": -1}, ConfigError, r"\.retries: must be in 0\.\.100"),
        ({"retries": 1.0}, TypeError, r"\.retries must be an int"),
    ],
)
def test_redis_store_options_are_checked_when_made(store_class: Any, options: Dict[str, Any], error: type, message: str) -> None:
    arguments = {"url": "redis://127.0.0.1:6379/0", **options}
    with pytest.raises(error, match=store_class.__name__ + message) as raised:
        store_class(arguments.pop("url"), **arguments)
    assert "secret" not in str(raised.value)  # a URL's password never reaches a message


def test_valid_urls_make_a_store_without_connecting() -> None:
    # Nothing listens on these: a store connects on its first call, not when made.
    for url in ("redis://127.0.0.1:1/0", "rediss://user:pw@example.invalid", "unix:///nonexistent/redis.sock"):
        RedisStore(url, timeout=0.1, on_error="closed", retries=0, prefix="").close()


def test_the_errors_are_the_standard_exceptions_callers_catch() -> None:
    assert issubclass(StoreUnavailable, DoomLoopError) and issubclass(StoreUnavailable, ConnectionError)
    assert issubclass(StoreCorrupt, DoomLoopError) and issubclass(StoreCorrupt, ValueError)
    import doomloop.gateway

    assert doomloop.gateway.StoreUnavailable is StoreUnavailable
    for name in doomloop.gateway.__all__:
        assert getattr(doomloop.gateway, name) is not None, name


def test_the_gateway_imports_without_redis_py() -> None:
    code = (
        "import sys\n"
        "sys.modules['redis'] = None\n"  # as if redis-py were not installed
        "from doomloop.gateway import MemoryStore, RedisStore\n"
        "assert MemoryStore().update('s', lambda d: b'x', 1) == b'x'\n"
        "try:\n"
        "    RedisStore('redis://127.0.0.1')\n"
        "except ImportError as error:\n"
        "    print(error)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    # Both ways work without a package index: the dependency itself, or the extra from a clone.
    assert (
        out.stdout
        == 'a Redis store needs redis-py: pip install "redis>=5.0.1" (or, in a clone of doomloop: pip install ".[redis]")\n'
    )
