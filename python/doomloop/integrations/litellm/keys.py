"""Session keys: which conversation a proxied request belongs to.

The name is the first present of:

1. LiteLLM's ``litellm_session_id`` (the body field, or the ``x-litellm-session-id`` header
   LiteLLM reads into it);
2. the request metadata's ``session_id`` (``metadata`` or ``litellm_metadata``);
3. the header ``x-doomloop-session``;
4. the ``user`` field;
5. a digest of the conversation's first two messages (and its system prompt), which stay
   the same as the conversation grows.

A function given as the guardrail's ``session_key`` option replaces this order (returning
None falls back to it). Whatever names the session, the key is prefixed with the tenant of the
request's API key: its team (``team:<id>``), else a digest of the key (``key:<digest>``), so
a client choosing another tenant's session name never reaches that tenant's session.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Callable, Dict, List, Optional

__all__ = ["SessionKeyFunction", "session_key", "session_name", "tenant_of"]

SessionKeyFunction = Callable[[Dict[str, Any], Any], Optional[str]]
"""``function(request_data, user_api_key_dict) -> name or None``."""

HEADER = "x-doomloop-session"
# Names past this length are replaced by their digest (the stores' keys are bounded).
_LONG = 200


def _digest(text: str, size: int = 32) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()[:size]


def tenant_of(user_api_key_dict: Any) -> str:
    """``team:<id>`` for a key in a team, else ``key:<digest of the key's hash>``, else
    ``anonymous`` (a proxy without keys)."""
    team = getattr(user_api_key_dict, "team_id", None)
    if isinstance(team, str) and team:
        return f"team:{_clean(team)}"
    key = getattr(user_api_key_dict, "token", None) or getattr(user_api_key_dict, "api_key", None)
    if isinstance(key, str) and key:
        return f"key:{_digest(key, 16)}"
    return "anonymous"


def _clean(name: str) -> str:
    return name if len(name) <= _LONG else "sha256:" + _digest(name)


def _headers(data: Dict[str, Any]) -> Dict[str, Any]:
    request = data.get("proxy_server_request")
    headers = request.get("headers") if isinstance(request, dict) else None
    if isinstance(headers, dict):
        return headers
    for name in ("metadata", "litellm_metadata"):
        metadata = data.get(name)
        found = metadata.get("headers") if isinstance(metadata, dict) else None
        if isinstance(found, dict):
            return found
    return {}


def session_name(data: Dict[str, Any], items: Optional[List[Any]]) -> str:
    """The session's name by the default order (see the module), with where it came from."""
    value = data.get("litellm_session_id")
    if isinstance(value, str) and value:
        return f"litellm:{_clean(value)}"
    for name in ("metadata", "litellm_metadata"):
        metadata = data.get(name)
        value = metadata.get("session_id") if isinstance(metadata, dict) else None
        if isinstance(value, str) and value:
            return f"session:{_clean(value)}"
    headers = _headers(data)
    value = headers.get(HEADER) or next((v for k, v in headers.items() if isinstance(k, str) and k.lower() == HEADER), None)
    if isinstance(value, str) and value:
        return f"header:{_clean(value)}"
    value = data.get("user")
    if isinstance(value, str) and value:
        return f"user:{_clean(value)}"
    start = [data.get("system"), (items or [])[:2]]
    return "digest:" + _digest(json.dumps(start, sort_keys=True, default=str))


def session_key(
    data: Dict[str, Any], user_api_key_dict: Any, items: Optional[List[Any]], custom: Optional[SessionKeyFunction]
) -> str:
    """The request's session key: its tenant, ``/``, and the session's name."""
    name = None
    if custom is not None:
        chosen = custom(data, user_api_key_dict)
        if chosen is not None:
            if not isinstance(chosen, str):
                raise TypeError(f"the session_key function must return a str or None, got {type(chosen).__name__}")
            name = f"custom:{_clean(chosen)}"
    if name is None:
        name = session_name(data, items)
    return f"{tenant_of(user_api_key_dict)}/{name}"
