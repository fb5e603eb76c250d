"""The three request shapes the guardrail reads, and what it reads and writes in each:

- ``chat``: ``/v1/chat/completions``, the history in ``messages``;
- ``responses``: ``/v1/responses``, the history in ``input`` (a string is one user message);
- ``anthropic``: ``/v1/messages``, the history in ``messages`` (content blocks), the system
  prompt in ``system``.

The history is read with :mod:`doomloop.traces` (``openai_chat``, ``openai_responses``,
``anthropic``), whose per-request readers never raise: what they cannot read is reported and
skipped, and the guardrail logs it.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional

from ...traces import Step, TraceFormatError, anthropic, openai_chat, openai_responses
from .._streams import Pieces, field
from ..anthropic import message_pieces
from ..openai import chat_pieces, responses_pieces

__all__ = ["ANTHROPIC", "CHAT", "RESPONSES", "add_note", "answer_text", "history", "pieces_of", "reader", "shape_of"]

CHAT = "chat"
RESPONSES = "responses"
ANTHROPIC = "anthropic"

_READERS = {CHAT: openai_chat.steps, RESPONSES: openai_responses.steps, ANTHROPIC: anthropic.steps}
_PIECES: Dict[str, Pieces] = {CHAT: chat_pieces, RESPONSES: responses_pieces, ANTHROPIC: message_pieces}


def shape_of(data: Dict[str, Any], call_type: Optional[str]) -> Optional[str]:
    """The request's shape, from LiteLLM's call type (and the body when it has none), or None
    for a request with no conversation (embeddings, images, ...)."""
    kind = str(call_type or "")
    if "anthropic" in kind:
        return ANTHROPIC
    if "responses" in kind:
        return RESPONSES
    if "completion" in kind or not kind:
        if "messages" in data:
            return CHAT
        if "input" in data and not kind:
            return RESPONSES
    return None


def history(data: Dict[str, Any], shape: str) -> Optional[List[Any]]:
    """The request's history as a list, or None when it has none LiteLLM would accept."""
    items = data.get("input") if shape == RESPONSES else data.get("messages")
    if isinstance(items, str) and shape == RESPONSES:
        return [{"role": "user", "content": items}]
    return items if isinstance(items, list) else None


def reader(shape: str, problems: List[TraceFormatError]) -> Callable[[List[Any]], List[Step]]:
    """The steps of a slice of a ``shape`` history; what cannot be read goes to ``problems``."""
    steps = _READERS[shape]
    return lambda items: steps(items, on_skip=problems.append)


def pieces_of(shape: str) -> Pieces:
    """The stream-chunk reader of a ``shape`` response."""
    return _PIECES[shape]


def add_note(data: Dict[str, Any], shape: str, note: str) -> None:
    """Add ``note`` to the request, where the model reads instructions: a system message at the
    end of a chat history, a developer message at the end of a Responses ``input``, the end of
    an Anthropic ``system`` prompt. The client's own lists are not changed (copies replace
    them)."""
    if shape == CHAT:
        data["messages"] = list(data["messages"]) + [{"role": "system", "content": note}]
    elif shape == RESPONSES:
        items = history(data, shape) or []
        data["input"] = list(items) + [{"type": "message", "role": "developer", "content": note}]
    else:
        system = data.get("system")
        if isinstance(system, list):
            data["system"] = list(system) + [{"type": "text", "text": note}]
        elif isinstance(system, str) and system:
            data["system"] = f"{system}\n\n{note}"
        else:
            data["system"] = note


def answer_text(response: Any) -> Optional[str]:
    """The text of a non-streamed answer: a chat completion's first choice, a Responses
    response's output text, an Anthropic message's text blocks (objects or dicts)."""
    choices = field(response, "choices")
    if choices:
        message = field(choices[0], "message")
        content = None if message is None else field(message, "content")
        return content if isinstance(content, str) else None
    output = field(response, "output")
    if isinstance(output, list):
        texts = [
            field(part, "text")
            for item in output
            for part in (field(item, "content") or ())
            if field(part, "type") == "output_text"
        ]
        return "".join(text for text in texts if isinstance(text, str)) or None
    content = field(response, "content")
    if isinstance(content, list):
        texts = [field(block, "text") for block in content if field(block, "type") == "text"]
        return "".join(text for text in texts if isinstance(text, str)) or None
    return None
