"""Reader of OpenAI chat-completions message lists (format ``"openai-chat"``).

A record is a conversation: a list of messages, or an object ``{"messages": [...]}`` (the
shape of mini-swe-agent trajectories, whose ``info.exit_status`` becomes the run's). A file
is one such JSON document, or JSON Lines of them; a line that re-sends the previous line's
messages continues its run (see :mod:`doomloop.traces.conversation`).

Messages:

- ``user``: a ``"user"`` step with the content's text;
- ``assistant`` with ``tool_calls``: one ``"tool"`` step per call, ``function.name`` and
  ``function.arguments`` (a JSON string, kept raw when it is not JSON), the message's text as
  the first call's ``thought``, its ``usage`` (``prompt_tokens``/``completion_tokens``; in a
  mini-swe-agent v2 trajectory, ``extra.response.usage``) on the first call;
- ``assistant`` without calls: an ``"assistant"`` step;
- ``tool``: the result of the call whose id is its ``tool_call_id`` (a leading
  ``<returncode>N</returncode>`` is read as the return code);
- the deprecated functions API: an ``assistant`` message's ``function_call`` (``name``,
  ``arguments``) is a ``"tool"`` step without an id, and its result is the first ``function``
  message after it, before the next assistant message, of the same ``name`` (or of none);
- ``system``, ``developer`` and ``exit`` (the last message of a mini-swe-agent v2
  trajectory, whose ``extra.exit_status`` is the run's when ``info`` has none): not steps.

A mini-swe-agent trajectory (``trajectory_format`` ``mini-swe-agent-*``, or an
``info.mini_version``) whose model acts in text: an assistant message without calls that holds
exactly one ```` ```bash ```` (or ```` ```mswea_bash_command ````) block is a ``"bash"`` call
with arguments ``{"command": ...}``, the message's text as its ``thought``, and the user
message right after it as its result (the observation: ``<returncode>N</returncode>`` and the
output, or a timeout). A message with no block or several is an ``"assistant"`` step, as the
agent answers it with a format error rather than running anything.

A message that cannot be read (not an object, an unknown role, a call without a name, a
result whose call is missing) is reported and skipped; a call without an id is kept, without
a result.
"""

from __future__ import annotations

import re
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Set, Tuple

from .conversation import Conversation, content_text, conversations, report_to
from .decode import kind, maybe_json, optional_str, tokens
from .errors import TraceFormatError
from .records import Run, Step, new_step
from .runs import call_step
from .source import Report

__all__ = ["NAME", "looks_like", "runs", "steps"]

NAME = "openai-chat"
# The name sets are tuples: the values tested come from the trace, and may be lists, which a
# set cannot look up.
_TEXT = ("text", "input_text", "output_text")
# ``exit``: the message a mini-swe-agent v2 trajectory ends with (its exit status and submission).
_QUIET_ROLES = ("system", "developer", "exit")
_ROLES = ("user", "assistant", "tool", "function") + _QUIET_ROLES
# A text-based mini-swe-agent action opens with v1's ```bash or v2's ```mswea_bash_command
# and closes at the next line that starts with ```.
_BASH_OPENING = re.compile(r"```(?:bash|mswea_bash_command)[ \t\r\f\v]*\n")
_BASH_CLOSING = "\n```"


def steps(messages: Any, *, on_skip: Optional[Callable[[TraceFormatError], None]] = None) -> List[Step]:
    """The steps of one request's message list. Never raises: what cannot be read is passed
    to ``on_skip`` (a :class:`TraceFormatError` naming the message) and skipped."""
    if not isinstance(messages, list):
        report_to(on_skip)(f"messages: expected an array, got {kind(messages)}", None)
        return []
    return _steps(messages, report_to(on_skip), lambda index: None)


def _steps(
    messages: List[Any], report: Report, line_of: Callable[[int], Optional[int]], text_actions: bool = False
) -> List[Step]:
    results: Dict[str, Tuple[int, Dict[str, Any]]] = {}
    for index, message in enumerate(messages):
        if isinstance(message, dict) and message.get("role") == "tool":
            call_id = message.get("tool_call_id")
            if isinstance(call_id, str):
                results[call_id] = (index, message)
    matched: Set[str] = set()
    # The indexes of the messages a call took as its result: the ``function`` message of a
    # legacy ``function_call``, the observation after a text action.
    answered: Set[int] = set()
    out: List[Step] = []
    for index, message in enumerate(messages):
        line = line_of(index)
        if not isinstance(message, dict):
            report(f"messages[{index}]: expected an object, got {kind(message)}", line)
            continue
        role = message.get("role")
        if role == "assistant":
            calls = message.get("tool_calls")
            text = content_text(message.get("content"), _TEXT)
            given, produced = tokens(_usage(message))
            if calls and isinstance(calls, list):
                _calls(calls, text, given, produced, results, matched, out, report, index, line)
            elif message.get("function_call") is not None:
                step = _function_call(messages, index, text, given, produced, answered, report, line)
                if step is not None:
                    out.append(step)
            elif text_actions and (command := _text_action(text)) is not None:
                out.append(_text_action_step(messages, index, command, text, given, produced, answered, line))
            else:
                out.append(
                    new_step(None, None, None, None, None, None, False, "assistant", text, None, given, produced, line=line)
                )
        elif role == "tool":
            if not isinstance(message.get("tool_call_id"), str):
                report(f"messages[{index}]: a tool message without a tool_call_id", line)
        elif role == "user":
            if index in answered:
                continue
            out.append(
                new_step(
                    None, None, None, None, None, None, False, "user", content_text(message.get("content"), _TEXT), line=line
                )
            )
        elif role == "function":
            if index not in answered:
                report(f"messages[{index}]: a function result for {message.get('name')!r}, which no function_call has", line)
        elif role not in _QUIET_ROLES:
            report(f"messages[{index}].role: unknown role {role!r}", line)
    for call_id, (index, _) in results.items():
        if call_id not in matched:
            report(f"messages[{index}]: a result for {call_id!r}, which no call has", line_of(index))
    return out


def _calls(
    calls: List[Any],
    text: Optional[str],
    given: Optional[int],
    produced: Optional[int],
    results: Dict[str, Tuple[int, Dict[str, Any]]],
    matched: Set[str],
    out: List[Step],
    report: Report,
    index: int,
    line: Optional[int],
) -> None:
    # The message's text and usage go with its first call.
    first = True
    for number, call in enumerate(calls):
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict) or not isinstance(name := function.get("name"), str):
            report(f"messages[{index}].tool_calls[{number}]: a call without a function name", line)
            continue
        call_id = call.get("id")
        result = None
        if isinstance(call_id, str):
            found = results.get(call_id)
            if found is not None:
                matched.add(call_id)
                result = content_text(found[1].get("content"), _TEXT) or ""
        else:
            call_id = None
            report(f"messages[{index}].tool_calls[{number}]: a call without an id (kept, with no result)", line)
        if first:
            out.append(call_step(name, maybe_json(function.get("arguments")), call_id, text, result, given, produced, line))
            first = False
        else:
            out.append(call_step(name, maybe_json(function.get("arguments")), call_id, None, result, None, None, line))


def _function_call(
    messages: List[Any],
    index: int,
    text: Optional[str],
    given: Optional[int],
    produced: Optional[int],
    answered: Set[int],
    report: Report,
    line: Optional[int],
) -> Optional[Step]:
    """The step of the legacy ``function_call`` of ``messages[index]``, with its result: the
    first ``function`` message of the same name (or of none) after it and before the next
    assistant message. The search stops there, so the whole list is read once over."""
    function = messages[index]["function_call"]
    name = function.get("name") if isinstance(function, dict) else None
    if not isinstance(function, dict) or not isinstance(name, str):
        report(f"messages[{index}].function_call: a call without a function name", line)
        return None
    result = None
    for later in range(index + 1, len(messages)):
        message = messages[later]
        role = message.get("role") if isinstance(message, dict) else None
        if role == "assistant":
            break
        if role == "function" and later not in answered and message.get("name") in (name, None):
            answered.add(later)
            result = content_text(message.get("content"), _TEXT) or ""
            break
    return call_step(name, maybe_json(function.get("arguments")), None, text, result, given, produced, line)


def _usage(message: Dict[str, Any]) -> Any:
    # A mini-swe-agent v2 message keeps the model's response, with its usage, under "extra".
    if "usage" in message:
        return message["usage"]
    extra = message.get("extra")
    response = extra.get("response") if isinstance(extra, dict) else None
    return response.get("usage") if isinstance(response, dict) else None


def _text_action(text: Optional[str]) -> Optional[str]:
    """The command of a message with exactly one bash block, not empty (mini-swe-agent runs
    no other). One pass over the text: a block that never closes ends the search, as no later one can."""
    found: List[str] = []
    at = 0
    while text is not None and len(found) < 2:
        opening = _BASH_OPENING.search(text, at)
        closing = text.find(_BASH_CLOSING, opening.end() - 1) if opening is not None else -1
        if opening is None or closing < 0:
            break
        found.append(text[opening.end() : closing])
        at = closing + len(_BASH_CLOSING)
    return (found[0].strip() or None) if len(found) == 1 else None


def _text_action_step(
    messages: List[Any],
    index: int,
    command: str,
    text: Optional[str],
    given: Optional[int],
    produced: Optional[int],
    answered: Set[int],
    line: Optional[int],
) -> Step:
    """The ``"bash"`` call of the text action of ``messages[index]``, with the user message
    right after it as its result (none when the run ends there)."""
    result = None
    after = messages[index + 1] if index + 1 < len(messages) else None
    if isinstance(after, dict) and after.get("role") == "user":
        answered.add(index + 1)
        result = content_text(after.get("content"), _TEXT) or ""
    return call_step("bash", {"command": command}, None, text, result, given, produced, line)


def looks_like(value: Any) -> int:
    """2 when ``value`` is a chat conversation by a mark only this format has (``tool_calls``
    or ``function_call``, a ``tool``, ``function`` or ``system`` message in a message list),
    1 when it is a list of role/content messages another format could have written, 0
    otherwise."""
    messages = value.get("messages") if isinstance(value, dict) else value
    if not isinstance(messages, list) or not messages:
        return 0
    score = 1
    for message in messages[:64]:
        if not isinstance(message, dict) or message.get("role") not in _ROLES or "type" in message:
            return 0
        if (
            "tool_calls" in message
            or "tool_call_id" in message
            or message.get("function_call") is not None
            or message.get("role") in ("tool", "function", "system", "developer")
        ):
            score = 2
        content = message.get("content")
        if isinstance(content, list) and any(
            isinstance(part, dict) and part.get("type") in ("tool_use", "tool_result") for part in content
        ):
            return 0
    return score


def runs(records: Iterable[Tuple[Optional[int], Any]], report: Report, source: Optional[str]) -> Iterator[Run]:
    """The runs of a file's records (see the module's documentation)."""
    for conversation in conversations(records, lambda value, line: _conversation(value, line, report)):
        found = _steps(conversation.items, report, conversation.line_of, conversation.text_actions)
        yield Run(conversation.path, conversation.exit_status, tuple(found), conversation.session_id, None, source, NAME)


def _conversation(value: Any, line: Optional[int], report: Report) -> Optional[Conversation]:
    if isinstance(value, list):
        return Conversation(value, [0], [line])
    messages = value.get("messages") if isinstance(value, dict) else None
    if not isinstance(messages, list):
        report(f"a conversation is a list of messages or an object with one, got {kind(value)}", line)
        return None
    info = value.get("info")
    session = optional_str(value, "session_id") or optional_str(value, "id")
    trajectory = optional_str(value, "trajectory_format") or ""
    text_actions = trajectory.startswith("mini-swe-agent") or (isinstance(info, dict) and "mini_version" in info)
    exit_status = optional_str(info, "exit_status")
    last = messages[-1] if messages else None
    if exit_status is None and isinstance(last, dict) and last.get("role") == "exit":
        exit_status = optional_str(last.get("extra"), "exit_status")
    return Conversation(messages, [0], [line], session, exit_status, optional_str(value, "path"), text_actions)
