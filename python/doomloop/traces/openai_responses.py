"""Reader of OpenAI Responses API items (format ``"openai-responses"``).

A record is a list of items, a request (its ``input``: a string or a list of items), a
response (its ``output``; ``usage`` with ``input_tokens``/``output_tokens``), or an object with
both. A file is one such JSON document, or JSON Lines of them. A line continues the previous
line's run when it re-sends the previous items (see :mod:`doomloop.traces.conversation`), when
its ``previous_response_id`` is the previous line's ``id``, when both name the same
``conversation``, or when it is the response to the request before it.

Items:

- ``function_call`` (``call_id``, ``name``, ``arguments`` as a JSON string, kept raw when it is
  not JSON) and ``custom_tool_call`` (``input``): a ``"tool"`` step, with the text of the
  assistant message just before it as its ``thought``;
- ``function_call_output`` and ``custom_tool_call_output`` (``call_id``, ``output`` as a string
  or content parts): the result of that call;
- ``message`` (or an item with a ``role`` and no ``type``): a ``"user"`` or ``"assistant"``
  step with its text; ``system`` and ``developer`` messages are not steps;
- ``compaction``: a ``"compaction"`` step;
- ``reasoning``, ``item_reference`` and the built-in tools' calls: not steps.

A response's usage goes on the first step of its output. What cannot be read is reported and
skipped; a call without a ``call_id`` is kept, without a result.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Set, Tuple

from .conversation import USAGE_KEY, Conversation, content_text, conversations, report_to
from .decode import kind, maybe_json, optional_str, tokens
from .errors import TraceFormatError
from .records import Run, Step, new_step
from .runs import call_step
from .source import Report

__all__ = ["CALL_ITEMS", "NAME", "OUTPUT_ITEMS", "QUIET_ITEMS", "item_steps", "looks_like", "runs", "steps"]

NAME = "openai-responses"
# The name sets are tuples: the values tested come from the trace, and may be lists, which a
# set cannot look up.
_TEXT = ("input_text", "output_text", "text")
CALL_ITEMS = ("function_call", "custom_tool_call")
"""The item types of a call (``OUTPUT_ITEMS`` its result's); ``QUIET_ITEMS`` are no steps."""
OUTPUT_ITEMS = ("function_call_output", "custom_tool_call_output")
QUIET_ITEMS = (
    "reasoning",
    "item_reference",
    "web_search_call",
    "file_search_call",
    "computer_call",
    "computer_call_output",
    "code_interpreter_call",
    "image_generation_call",
    "local_shell_call",
    "local_shell_call_output",
    "mcp_call",
    "mcp_list_tools",
    "mcp_approval_request",
    "mcp_approval_response",
)
_MARKS = CALL_ITEMS + OUTPUT_ITEMS + ("message", "reasoning", "compaction")


def steps(items: Any, *, on_skip: Optional[Callable[[TraceFormatError], None]] = None) -> List[Step]:
    """The steps of one request's ``input`` items (a string is one user message). Never
    raises: what cannot be read is passed to ``on_skip`` (a :class:`TraceFormatError` naming
    the item) and skipped."""
    if isinstance(items, str):
        items = [{"role": "user", "content": items}]
    if not isinstance(items, list):
        report_to(on_skip)(f"input: expected an array, got {kind(items)}", None)
        return []
    return item_steps(items, report_to(on_skip), lambda index: None)


def item_steps(items: List[Any], report: Report, line_of: Callable[[int], Optional[int]]) -> List[Step]:
    """The steps of ``items``, each problem passed to ``report`` with the line
    ``line_of(index)`` gives (the Codex reader's items are read here too). An item may carry
    the usage of the response that produced it under ``USAGE_KEY``."""
    outputs: Dict[str, Dict[str, Any]] = {}
    for item in items:
        if isinstance(item, dict) and item.get("type") in OUTPUT_ITEMS and isinstance(item.get("call_id"), str):
            outputs[item["call_id"]] = item
    matched: Set[str] = set()
    out: List[Step] = []
    # The assistant message just before a call is its thought: it is held until the next
    # item says whether it is one, with its line and the response's usage.
    held: Optional[Tuple[Optional[str], Optional[int], Any]] = None
    usage: Any = None
    for index, item in enumerate(items):
        where = f"items[{index}]"
        line = line_of(index)
        if not isinstance(item, dict):
            report(f"{where}: expected an object, got {kind(item)}", line)
            continue
        usage = item.get(USAGE_KEY, usage)
        type_ = item.get("type", "message" if "role" in item else None)
        if type_ in CALL_ITEMS:
            name = item.get("name")
            if not isinstance(name, str):
                report(f"{where}: a {type_} without a name", line)
                continue
            call_id = item.get("call_id")
            if not isinstance(call_id, str):
                call_id = None
                report(f"{where}: a {type_} without a call_id (kept, with no result)", line)
            found = outputs.get(call_id) if call_id is not None else None
            result = None
            if found is not None and call_id is not None:
                matched.add(call_id)
                result = content_text(found.get("output"), _TEXT) or ""
            arguments = maybe_json(item.get("arguments") if type_ == "function_call" else item.get("input"))
            thought, usage = (held[0], held[2]) if held is not None else (None, usage)
            given, produced = tokens(usage)
            out.append(call_step(name, arguments, call_id, thought, result, given, produced, line))
            held = usage = None
            continue
        if held is not None:
            out.append(_answer(*held))
            held = None
        if type_ == "message":
            role = item.get("role")
            text = content_text(item.get("content"), _TEXT)
            if role == "assistant":
                held, usage = (text, line, usage), None
            elif role == "user":
                out.append(new_step(None, None, None, None, None, None, False, "user", text, line=line))
            elif role not in ("system", "developer"):
                report(f"{where}.role: unknown role {role!r}", line)
        elif type_ == "compaction":
            out.append(new_step(None, None, None, None, None, None, False, "compaction", None, line=line))
        elif type_ in OUTPUT_ITEMS:
            if not isinstance(item.get("call_id"), str):
                report(f"{where}: a {type_} without a call_id", line)
        elif type_ not in QUIET_ITEMS:
            report(f"{where}: unknown item type {type_!r}", line)
    if held is not None:
        out.append(_answer(*held))
    for call_id in outputs:
        if call_id not in matched:
            report(f"a {outputs[call_id].get('type')} for {call_id!r}, which no call has", None)
    return out


def _answer(text: Optional[str], line: Optional[int], usage: Any) -> Step:
    given, produced = tokens(usage)
    return new_step(None, None, None, None, None, None, False, "assistant", text, None, given, produced, line=line)


def looks_like(value: Any) -> int:
    """2 when ``value`` is a request (``input``), a response (``output``) or a list of items
    with a ``type`` this format has; 0 otherwise."""
    if isinstance(value, dict):
        if value.get("object") == "response" or isinstance(value.get("output"), list):
            return 2
        if "input" in value and "messages" not in value and isinstance(value.get("input"), (list, str)):
            return 2
        return 0
    if isinstance(value, list) and value and all(isinstance(item, dict) for item in value[:64]):
        return 2 if any(item.get("type") in _MARKS for item in value[:64]) else 0
    return 0


def runs(records: Iterable[Tuple[Optional[int], Any]], report: Report, source: Optional[str]) -> Iterator[Run]:
    """The runs of a file's records (see the module's documentation)."""
    read = lambda value, line: _conversation(value, line, report)  # noqa: E731
    for conversation in conversations(records, read, _follows):
        found = item_steps(conversation.items, report, conversation.line_of)
        yield Run(conversation.path, conversation.exit_status, tuple(found), conversation.session_id, None, source, NAME)


def _follows(previous: Any, value: Any) -> bool:
    if not isinstance(previous, dict) or not isinstance(value, dict):
        return False
    earlier = previous.get("id")
    if earlier is not None and value.get("previous_response_id") == earlier:
        return True
    conversation = _conversation_id(value)
    if conversation is not None and conversation == _conversation_id(previous):
        return True
    # A response logged after the request it answers.
    return "input" in previous and "output" not in previous and "output" in value and "input" not in value


def _conversation_id(record: Dict[str, Any]) -> Optional[str]:
    conversation = record.get("conversation")
    return (
        optional_str(conversation, "id")
        if isinstance(conversation, dict)
        else conversation
        if isinstance(conversation, str)
        else None
    )


def _conversation(value: Any, line: Optional[int], report: Report) -> Optional[Conversation]:
    if isinstance(value, list):
        return Conversation(list(value), [0], [line])
    if not isinstance(value, dict):
        report(f"a record is a list of items, a request or a response, got {kind(value)}", line)
        return None
    given = value.get("input", [])
    items = [{"role": "user", "content": given}] if isinstance(given, str) else given
    output = value.get("output", [])
    if not isinstance(items, list) or not isinstance(output, list):
        report("input and output: expected arrays", line)
        return None
    items = list(items)
    if output:
        first = output[0]
        # The usage rides on the first output item, in a key no item has.
        items.append({**first, USAGE_KEY: value.get("usage")} if isinstance(first, dict) else first)
        items.extend(output[1:])
    status = optional_str(value, "status")
    return Conversation(items, [0], [line], _conversation_id(value) or optional_str(value, "id"), status if output else None)
