"""Recorded server-sent event streams of the OpenAI and Anthropic APIs, built event by event in
the wire format those APIs send (``data:`` lines, with ``event:`` lines for the Responses API
and Anthropic), and the SDK clients that parse them through an in-process transport."""

from __future__ import annotations

import json
from types import ModuleType
from typing import Any, Dict, Iterable, List, Optional

import httpx


def frames(events: Iterable[Dict[str, Any]], *, named: bool, done: bool) -> bytes:
    """The SSE body of ``events``: each one ``event: <type>`` (when ``named``) and ``data:``."""
    out: List[str] = []
    for event in events:
        if named:
            out.append(f"event: {event['type']}\n")
        out.append(f"data: {json.dumps(event, separators=(',', ':'))}\n\n")
    if done:
        out.append("data: [DONE]\n\n")
    return "".join(out).encode()


def chat_chunk(choices: List[Dict[str, Any]], *, usage: Optional[Dict[str, int]] = None) -> Dict[str, Any]:
    chunk: Dict[str, Any] = {
        "id": "chatcmpl-rec1",
        "object": "chat.completion.chunk",
        "created": 1764547200,
        "model": "gpt-4o-mini-2024-07-18",
        "system_fingerprint": "fp_0ba0d124f1",
        "choices": choices,
    }
    if usage is not None:
        chunk["usage"] = usage
    return chunk


def text_delta(index: int, text: str) -> Dict[str, Any]:
    return {"index": index, "delta": {"content": text}, "logprobs": None, "finish_reason": None}


def tool_delta(index: int, call: int, arguments: str, *, first: bool = False, name: str = "search") -> Dict[str, Any]:
    function: Dict[str, Any] = {"arguments": arguments}
    entry: Dict[str, Any] = {"index": call, "function": function}
    if first:
        entry.update({"id": f"call_{index}_{call}", "type": "function"})
        function["name"] = name
    return {"index": index, "delta": {"tool_calls": [entry]}, "logprobs": None, "finish_reason": None}


def chat_stream(pieces: List[Dict[str, Any]], choices: int = 1) -> bytes:
    """A chat-completion stream: a role delta per choice, one chunk per piece, finish reasons,
    a usage chunk and ``[DONE]``."""
    chunks = [
        chat_chunk([{"index": i, "delta": {"role": "assistant", "content": ""}, "logprobs": None, "finish_reason": None}])
        for i in range(choices)
    ]
    chunks += [chat_chunk([piece]) for piece in pieces]
    chunks += [chat_chunk([{"index": i, "delta": {}, "logprobs": None, "finish_reason": "stop"}]) for i in range(choices)]
    chunks.append(chat_chunk([], usage={"prompt_tokens": 12, "completion_tokens": len(pieces), "total_tokens": 12 + len(pieces)}))
    return frames(chunks, named=False, done=True)


def responses_stream(deltas: List[Dict[str, Any]]) -> bytes:
    """A Responses API stream around ``deltas`` (``response.*.delta`` events)."""
    response = {
        "id": "resp_rec1",
        "object": "response",
        "created_at": 1764547200,
        "status": "in_progress",
        "model": "gpt-4o-mini",
        "output": [],
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
    }
    events: List[Dict[str, Any]] = [{"type": "response.created", "sequence_number": 0, "response": response}]
    for number, delta in enumerate(deltas, start=1):
        events.append({**delta, "sequence_number": number})
    completed = {**response, "status": "completed"}
    events.append({"type": "response.completed", "sequence_number": len(events), "response": completed})
    return frames(events, named=True, done=False)


def output_text(item: int, text: str) -> Dict[str, Any]:
    return {
        "type": "response.output_text.delta",
        "item_id": f"msg_{item}",
        "output_index": item,
        "content_index": 0,
        "delta": text,
        "logprobs": [],
    }


def function_arguments(item: int, text: str) -> Dict[str, Any]:
    return {"type": "response.function_call_arguments.delta", "item_id": f"fc_{item}", "output_index": item, "delta": text}


def anthropic_stream(blocks: List[Dict[str, Any]], deltas: List[Dict[str, Any]]) -> bytes:
    """A Messages stream: message_start, the blocks' starts, ``deltas``, their stops, the end."""
    message = {
        "id": "msg_rec1",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5",
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": 25, "output_tokens": 1},
    }
    events: List[Dict[str, Any]] = [{"type": "message_start", "message": message}]
    events += [{"type": "content_block_start", "index": i, "content_block": block} for i, block in enumerate(blocks)]
    events += deltas
    events += [{"type": "content_block_stop", "index": i} for i in range(len(blocks))]
    events.append(
        {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None}, "usage": {"output_tokens": 15}}
    )
    events.append({"type": "message_stop"})
    return frames(events, named=True, done=False)


def anthropic_text(index: int, text: str) -> Dict[str, Any]:
    return {"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": text}}


def anthropic_json(index: int, text: str) -> Dict[str, Any]:
    return {"type": "content_block_delta", "index": index, "delta": {"type": "input_json_delta", "partial_json": text}}


class Recorded:
    """An httpx transport that answers every request with one recorded SSE body, and counts
    the responses closed (a guard that stops a stream must close it)."""

    def __init__(self, body: bytes) -> None:
        self.body = body
        self.closed = 0

    def sync(self, http: ModuleType = httpx) -> Any:
        """A client of ``http`` (httpx, or the fork of it an SDK release uses instead)."""
        owner = self

        class Body(http.SyncByteStream):  # type: ignore[name-defined,misc]
            def __iter__(self) -> Any:
                # Small pieces, as a network delivers them: frames split across reads.
                for start in range(0, len(owner.body), 97):
                    yield owner.body[start : start + 97]

            def close(self) -> None:
                owner.closed += 1

        return http.Client(transport=http.MockTransport(lambda request: _response(http, request, Body())))

    def asynchronous(self, http: ModuleType = httpx) -> Any:
        owner = self

        class Body(http.AsyncByteStream):  # type: ignore[name-defined,misc]
            async def __aiter__(self) -> Any:
                for start in range(0, len(owner.body), 97):
                    yield owner.body[start : start + 97]

            async def aclose(self) -> None:
                owner.closed += 1

        async def handler(request: Any) -> Any:
            return _response(http, request, Body())

        return http.AsyncClient(transport=http.MockTransport(handler))


def _response(http: ModuleType, request: Any, stream: Any) -> Any:
    return http.Response(200, headers={"content-type": "text/event-stream"}, stream=stream, request=request)


def sdk_http(sdk: ModuleType) -> ModuleType:
    """The HTTP library an SDK's clients take: recent anthropic releases moved to httpx2."""
    names = vars(sdk._base_client)
    module = names.get("httpx2") or names.get("httpx")
    return module if isinstance(module, ModuleType) else httpx
