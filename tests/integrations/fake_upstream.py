"""A fake upstream for the proxy tests: a stdlib HTTP server on a loopback port that answers
OpenAI's ``/v1/chat/completions`` and Anthropic's ``/v1/messages``, streamed or not, and records
each request body.

What it answers depends on the conversation's first user message:

- ``"task: loop"``: a call of the tool ``read_file`` with the same arguments every time (an
  agent stuck re-reading one file), with a fresh call id per response;
- ``"task: chant"``: an answer that repeats one sentence over and over;
- anything else: a healthy answer, the same for the same request.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Dict, Iterator, List, Tuple

HEALTHY = [f"Point {i}: the report covers area {i * 7 % 11} in new detail. " for i in range(12)]
CHANT_SENTENCE = "I will check the file again. "
CHANT = [CHANT_SENTENCE[i : i + 7] for i in range(0, len(CHANT_SENTENCE), 7)] * 120
TOOL_ARGUMENTS = '{"path": "notes/a.txt"}'


def _first_user(messages: List[Dict[str, Any]]) -> str:
    for message in messages:
        if message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, str):
            return content
        if isinstance(content, list):
            # Anthropic's content blocks.
            return "".join(block.get("text", "") for block in content if isinstance(block, dict))
    return ""


class Upstream:
    """The server, its URL, and the bodies it received (in order)."""

    def __init__(self) -> None:
        self.requests: List[Dict[str, Any]] = []
        self.calls = 0
        self._lock = threading.Lock()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))) or b"{}")
                with owner._lock:
                    owner.requests.append(body)
                    owner.calls += 1
                    number = owner.calls
                kind, pieces = owner.answer(body, number)
                if self.path.rstrip("/").endswith("/messages"):
                    self._messages(body, kind, pieces, number)
                elif body.get("stream"):
                    self._stream(body, kind, pieces, number)
                else:
                    self._whole(body, kind, pieces, number)

            def _send(self, status: int, content_type: str, data: bytes) -> None:
                self.send_response(status)
                self.send_header("content-type", content_type)
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _whole(self, body: Dict[str, Any], kind: str, pieces: List[str], number: int) -> None:
                if kind == "tool":
                    message: Dict[str, Any] = {"role": "assistant", "content": None, "tool_calls": [_call(number)]}
                    finish = "tool_calls"
                else:
                    message = {"role": "assistant", "content": "".join(pieces)}
                    finish = "stop"
                reply = {
                    "id": f"chatcmpl-fake{number}",
                    "object": "chat.completion",
                    "created": 1764547200,
                    "model": body.get("model", "fake"),
                    "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                    "usage": {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20},
                }
                self._send(200, "application/json", json.dumps(reply).encode())

            def _stream(self, body: Dict[str, Any], kind: str, pieces: List[str], number: int) -> None:
                frames = (f"data: {json.dumps(chunk)}\n\n" for chunk in _chunks(body, kind, pieces, number))
                self._frames(frames, "data: [DONE]\n\n")

            def _messages(self, body: Dict[str, Any], kind: str, pieces: List[str], number: int) -> None:
                if not body.get("stream"):
                    reply = _message(body, number, [{"type": "text", "text": "".join(pieces)}], "end_turn")
                    self._send(200, "application/json", json.dumps(reply).encode())
                    return
                events = _message_events(body, pieces, number)
                self._frames((f"event: {event['type']}\ndata: {json.dumps(event)}\n\n" for event in events), "")

            def _frames(self, frames: Iterator[str], last: str) -> None:
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("transfer-encoding", "chunked")
                self.end_headers()
                try:
                    for frame in frames:
                        data = frame.encode()
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                        self.wfile.flush()
                    if last:
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(last), last.encode()))
                    self.wfile.write(b"0\r\n\r\n")
                except OSError:
                    # The proxy stopped reading: a cut stream.
                    pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def answer(self, body: Dict[str, Any], number: int) -> Tuple[str, List[str]]:
        task = _first_user(body.get("messages") or [])
        if task.startswith("task: loop"):
            return "tool", []
        if task.startswith("task: chant"):
            return "text", CHANT
        return "text", HEALTHY

    def __enter__(self) -> Upstream:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()
        self.server.server_close()


def _call(number: int) -> Dict[str, Any]:
    return {"id": f"call_{number}", "type": "function", "function": {"name": "read_file", "arguments": TOOL_ARGUMENTS}}


def _chunks(body: Dict[str, Any], kind: str, pieces: List[str], number: int) -> Iterator[Dict[str, Any]]:
    def chunk(delta: Dict[str, Any], finish: Any = None) -> Dict[str, Any]:
        return {
            "id": f"chatcmpl-fake{number}",
            "object": "chat.completion.chunk",
            "created": 1764547200,
            "model": body.get("model", "fake"),
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }

    yield chunk({"role": "assistant", "content": ""})
    if kind == "tool":
        call = _call(number)
        yield chunk(
            {
                "tool_calls": [
                    {"index": 0, "id": call["id"], "type": "function", "function": {"name": "read_file", "arguments": ""}}
                ]
            }
        )
        yield chunk({"tool_calls": [{"index": 0, "function": {"arguments": TOOL_ARGUMENTS}}]})
        yield chunk({}, "tool_calls")
        return
    for piece in pieces:
        yield chunk({"content": piece})
    yield chunk({}, "stop")


def _message(body: Dict[str, Any], number: int, content: List[Dict[str, Any]], stop: Any) -> Dict[str, Any]:
    return {
        "id": f"msg_fake{number}",
        "type": "message",
        "role": "assistant",
        "model": body.get("model", "claude-fake"),
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 10},
    }


def _message_events(body: Dict[str, Any], pieces: List[str], number: int) -> Iterator[Dict[str, Any]]:
    """An Anthropic Messages stream: one text block, a delta per piece."""
    yield {"type": "message_start", "message": _message(body, number, [], None)}
    yield {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}
    for piece in pieces:
        yield {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": piece}}
    yield {"type": "content_block_stop", "index": 0}
    yield {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None}, "usage": {"output_tokens": 10}}
    yield {"type": "message_stop"}
