"""JSON decoding for the readers: orjson when it is installed (four to five times faster on
trace lines), the standard library otherwise, with the same results and errors."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import Any, Callable, Optional, Tuple, Union

__all__ = [
    "JSONDecodeError",
    "count",
    "dumps",
    "kind",
    "loads",
    "maybe_json",
    "not_json",
    "optional_str",
    "rfc3339_seconds",
    "tokens",
]

JSONDecodeError = json.JSONDecodeError
"""What :func:`loads` raises for text that is not JSON (orjson's error subclasses it)."""

loads: Callable[[Union[bytes, str]], Any]
try:
    import orjson

    loads = orjson.loads

    def dumps(value: Any) -> str:
        """Compact JSON text of a decoded value."""
        try:
            return orjson.dumps(value).decode()
        except TypeError:
            # What orjson does not encode, such as an integer past 64 bits (an OTLP
            # ``intValue`` given as a long digit string): the standard library's text.
            return json.dumps(value, separators=(",", ":"), ensure_ascii=False)

except ImportError:  # pragma: no cover - the stdlib path is tested by forcing it
    loads = json.loads

    def dumps(value: Any) -> str:
        """Compact JSON text of a decoded value."""
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def maybe_json(text: Any) -> Any:
    """Arguments as the readers keep them: a JSON string parsed; the raw string when it is not
    JSON (a model can emit arguments that are not, and the raw text is still the call's
    identity); any other value as it is."""
    if not isinstance(text, str):
        return text
    try:
        return loads(text)
    except (JSONDecodeError, RecursionError):  # the stdlib decoder recurses per nesting level
        return text


def not_json(raw: bytes, error: Exception) -> str:
    """The problem to report for a record that did not decode: not UTF-8, or not JSON."""
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as bad:
        return f"not UTF-8 ({bad.reason} at byte {bad.start})"
    if isinstance(error, JSONDecodeError):
        return f"not JSON ({error.msg}, line {error.lineno} column {error.colno})"
    return f"not JSON ({error})"


def rfc3339_seconds(value: Any) -> Optional[float]:
    """Seconds since the epoch of an RFC 3339 time (UTC when it has no offset); None for
    anything else."""
    if type(value) is not str:
        return None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return (moment if moment.tzinfo is not None else moment.replace(tzinfo=timezone.utc)).timestamp()


def optional_str(record: Any, key: str) -> Optional[str]:
    """``record[key]`` when ``record`` is an object holding a string there, else None."""
    value = record.get(key) if isinstance(record, dict) else None
    return value if isinstance(value, str) else None


# How the messages name what the decoder gave instead.
_JSON_KINDS = {bool: "a boolean", str: "a string", int: "a number", float: "a number", list: "an array", dict: "an object"}


def kind(value: Any) -> str:
    """How a problem names a decoded JSON value's type: ``"an object"``, ``"null"``, ..."""
    return "null" if value is None else _JSON_KINDS.get(type(value), type(value).__name__)


def tokens(usage: Any) -> Tuple[Optional[int], Optional[int]]:
    """``(input_tokens, output_tokens)`` of a usage object, in the names of either API
    (``input_tokens``/``output_tokens`` or ``prompt_tokens``/``completion_tokens``); a count
    that is not a non-negative integer is None. Anthropic counts the cached part of the input
    apart: its ``cache_creation_input_tokens`` and ``cache_read_input_tokens`` are added in."""
    if type(usage) is not dict and not isinstance(usage, dict):
        return None, None
    get = usage.get
    given = get("input_tokens")
    if given is None:
        given = count(get("prompt_tokens"))
    else:
        given = count(given)
        if given is not None and ("cache_read_input_tokens" in usage or "cache_creation_input_tokens" in usage):
            given += (count(get("cache_creation_input_tokens")) or 0) + (count(get("cache_read_input_tokens")) or 0)
    produced = get("output_tokens")
    if produced is None:
        produced = get("completion_tokens")
    return given, count(produced)


def count(value: Any) -> Optional[int]:
    """A token count as a decoded value gives it: a non-negative integer, else None (a bool is
    an int, but not a count)."""
    # The exact type first: what a decoder gives.
    if type(value) is int or (isinstance(value, int) and not isinstance(value, bool)):
        return value if value >= 0 else None
    return None
