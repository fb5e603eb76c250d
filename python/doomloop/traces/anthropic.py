"""Reader of Anthropic Messages (format ``"anthropic"``).

A record is a conversation: a list of messages, a request ``{"messages": [...]}`` (its
``system`` prompt is not a step), or a response ``{"type": "message", "role": "assistant",
"content": [...], "usage": {...}}`` (one assistant message). A file is one such JSON
document, or JSON Lines of them; a line that re-sends the previous line's messages continues
its run, and a response line continues the request before it (see
:mod:`doomloop.traces.conversation`).

Content is a string or a list of blocks:

- ``text``: the text of a ``"user"`` or ``"assistant"`` step; in an assistant message with
  ``tool_use`` blocks, the first call's ``thought``;
- ``tool_use`` (``id``, ``name``, ``input``): a ``"tool"`` step; the message's ``usage``
  (``input_tokens``/``output_tokens``) goes on its first call;
- ``tool_result`` (``tool_use_id``, ``content`` as a string or text blocks, ``is_error``):
  the result of that call;
- ``compaction``: a ``"compaction"`` step (its ``content`` as the text);
- ``thinking``, ``redacted_thinking``, ``image``, ``document`` and the server tools' blocks:
  not steps.

A block or message that cannot be read is reported and skipped; a call without an id is
kept, without a result.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Set, Tuple

from .conversation import Conversation, content_text, conversations, report_to
from .decode import kind, optional_str, tokens
from .errors import TraceFormatError
from .records import Run, Step, new_step
from .source import Report

__all__ = ["NAME", "looks_like", "runs", "steps"]

NAME = "anthropic"
# The name sets are tuples: the values tested come from the trace, and may be lists, which a
# set cannot look up.
_QUIET_BLOCKS = (
    "thinking",
    "redacted_thinking",
    "image",
    "document",
    "search_result",
    "server_tool_use",
    "web_search_tool_result",
    "web_fetch_tool_result",
    "code_execution_tool_result",
    "mcp_tool_use",
    "mcp_tool_result",
    "container_upload",
)
_MARKS = ("tool_use", "tool_result", "thinking", "redacted_thinking")


def steps(messages: Any, *, on_skip: Optional[Callable[[TraceFormatError], None]] = None) -> List[Step]:
    """The steps of one request's message list (plus, if you have it, the response appended
    as the last message). Never raises: what cannot be read is passed to ``on_skip`` (a
    :class:`TraceFormatError` naming the message) and skipped."""
    if not isinstance(messages, list):
        report_to(on_skip)(f"messages: expected an array, got {kind(messages)}", None)
        return []
    return message_steps(messages, report_to(on_skip), lambda index: None)


def message_steps(messages: List[Any], report: Report, line_of: Callable[[int], Optional[int]]) -> List[Step]:
    """The steps of ``messages``, each problem passed to ``report`` with the line
    ``line_of(index)`` gives (the Claude Code reader's messages are read here too)."""
    results: Dict[str, Dict[str, Any]] = {}
    for message in messages:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, list):
            for block in content:
                if isinstance(block, dict) and block.get("type") == "tool_result" and isinstance(block.get("tool_use_id"), str):
                    results[block["tool_use_id"]] = block
    matched: Set[str] = set()
    out: List[Step] = []
    for index, message in enumerate(messages):
        where = f"messages[{index}]"
        line = line_of(index)
        if not isinstance(message, dict):
            report(f"{where}: expected an object, got {kind(message)}", line)
            continue
        role = message.get("role")
        if role not in ("user", "assistant"):
            report(f"{where}.role: unknown role {role!r}", line)
            continue
        content = message.get("content")
        if isinstance(content, str):
            out.append(new_step(None, None, None, None, None, None, False, role, content, line=line))
            continue
        if not isinstance(content, list):
            report(f"{where}.content: expected a string or an array, got {kind(content)}", line)
            continue
        given, produced = tokens(message.get("usage"))
        texts: List[str] = []
        calls: List[Step] = []
        for number, block in enumerate(content):
            _block(block, f"{where}.content[{number}]", role, results, matched, texts, calls, out, report, line)
        text = "\n".join(texts) or None
        if calls:
            first = calls[0]
            calls[0] = new_step(
                first.tool,
                first.arguments,
                first.call_id,
                text,
                first.result_text,
                first.returncode,
                first.is_error,
                input_tokens=given,
                output_tokens=produced,
                line=line,
            )
            out.extend(calls)
        elif text is not None or role == "assistant":
            out.append(new_step(None, None, None, None, None, None, False, role, text, None, given, produced, line=line))
    for call_id in results:
        if call_id not in matched:
            report(f"a tool_result for {call_id!r}, which no tool_use has", None)
    return out


def _block(
    block: Any,
    where: str,
    role: str,
    results: Dict[str, Dict[str, Any]],
    matched: Set[str],
    texts: List[str],
    calls: List[Step],
    out: List[Step],
    report: Report,
    line: Optional[int],
) -> None:
    kind_of = block.get("type") if isinstance(block, dict) else None
    if kind_of == "text":
        if isinstance(block.get("text"), str) and block["text"]:
            texts.append(block["text"])
    elif kind_of == "tool_use" and role == "assistant":
        name = block.get("name")
        if not isinstance(name, str):
            report(f"{where}: a tool_use without a name", line)
            return
        call_id = block.get("id")
        if not isinstance(call_id, str):
            call_id = None
            report(f"{where}: a tool_use without an id (kept, with no result)", line)
        found = results.get(call_id) if call_id is not None else None
        result = None
        is_error = False
        if found is not None:
            matched.add(call_id)
            result = content_text(found.get("content")) or ""
            is_error = found.get("is_error") is True
        calls.append(new_step(name, block.get("input"), call_id, None, result, None, is_error, line=line))
    elif kind_of == "tool_result" and role == "user":
        if not isinstance(block.get("tool_use_id"), str):
            report(f"{where}: a tool_result without a tool_use_id", line)
    elif kind_of == "compaction":
        out.append(
            new_step(None, None, None, None, None, None, False, "compaction", content_text(block.get("content")), line=line)
        )
    elif kind_of not in _QUIET_BLOCKS:
        report(
            f"{where}: unknown block {kind_of!r}"
            if isinstance(block, dict)
            else f"{where}: expected an object, got {kind(block)}",
            line,
        )


def looks_like(value: Any) -> int:
    """2 when ``value`` has a mark only this format has (a ``tool_use``, ``tool_result`` or
    ``thinking`` block, a Messages response), 1 when it is a list of user/assistant messages
    another format could have written, 0 otherwise."""
    if (
        isinstance(value, dict)
        and value.get("type") == "message"
        and value.get("role") == "assistant"
        and isinstance(value.get("content"), list)
    ):
        return 2
    messages = value.get("messages") if isinstance(value, dict) else value
    if not isinstance(messages, list) or not messages:
        return 0
    score = 1
    for message in messages[:64]:
        if not isinstance(message, dict) or message.get("role") not in ("user", "assistant") or "tool_calls" in message:
            return 0
        content = message.get("content")
        if isinstance(content, list):
            for block in content:
                if not isinstance(block, dict):
                    return 0
                if block.get("type") in _MARKS:
                    score = 2
    return score


def runs(records: Iterable[Tuple[Optional[int], Any]], report: Report, source: Optional[str]) -> Iterator[Run]:
    """The runs of a file's records (see the module's documentation)."""
    read = lambda value, line: _conversation(value, line, report)  # noqa: E731
    for conversation in conversations(records, read, _answers):
        found = message_steps(conversation.items, report, conversation.line_of)
        yield Run(conversation.path, conversation.exit_status, tuple(found), conversation.session_id, None, source, NAME)


def _answers(previous: Any, value: Any) -> bool:
    # A response follows the request it answers.
    return isinstance(value, dict) and value.get("type") == "message" and isinstance(previous, dict) and "messages" in previous


def _conversation(value: Any, line: Optional[int], report: Report) -> Optional[Conversation]:
    if isinstance(value, list):
        return Conversation(value, [0], [line])
    if isinstance(value, dict) and value.get("type") == "message":
        return Conversation([value], [0], [line], None, optional_str(value, "stop_reason"))
    messages = value.get("messages") if isinstance(value, dict) else None
    if not isinstance(messages, list):
        report(f"a conversation is a list of messages, a request or a response, got {kind(value)}", line)
        return None
    return Conversation(
        messages, [0], [line], optional_str(value, "session_id") or optional_str(value, "id"), None, optional_str(value, "path")
    )
