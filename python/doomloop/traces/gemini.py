"""Reader of Google Gemini conversations (format ``"gemini"``): the ``contents`` the Gemini API,
Vertex AI and the google-genai SDKs send and receive, and Gemini CLI's saved chats.

A record is a conversation: a list of contents (what Gemini CLI's ``/chat save`` and its
checkpoints write), a request ``{"contents": [...]}`` (its ``systemInstruction``, ``tools``
and ``generationConfig`` are not steps), a ``GenerateContentResponse`` ``{"candidates":
[{"content": {...}, "finishReason"}], "usageMetadata": {...}}`` (its first candidate's content;
the finish reason is the run's ``exit_status``; an SDK response's
``automaticFunctionCallingHistory``, when it has one, is the conversation before it), a Vertex
AI batch prediction line ``{"request": {...}, "response": {...}}``, or one content. A file is
one such JSON document, or JSON Lines of them; a line that re-sends the previous line's
contents continues its run (see :mod:`doomloop.traces.conversation`), and so does a response
after the request it answers, and a line of one content (a history written a content a line).

A content is ``{"role": "user" | "model" | "function" | "tool", "parts": [...]}`` (no role is
``"user"``). Its parts, by their key, in the API's camelCase or the snake_case of the Python
SDK's ``model_dump()`` (whose keys set to null are absent):

- ``text``: the text of a ``"user"`` step (a user content without text, such as one of
  function responses only, is not a turn) or of an ``"assistant"`` step (a model content
  without calls); in a model content with calls, the first call's ``thought``. A part marked
  ``"thought": true`` (the model's thinking) is not text;
- ``functionCall`` (``name``, ``args``, ``id``): a ``"tool"`` step (several in one content are
  parallel calls); its ``args`` are kept as they are;
- ``functionResponse`` (``name``, ``response``, ``id``): the result of a call of the model
  content before it, matched by ``id`` when both have one, else the first unanswered call of
  that ``name``. The result is the ``response`` object as compact JSON, or the text of a
  response ``{"output" | "result" | "content": text}``; a response ``{"error": ...}`` means
  the call failed (``is_error``, the text as its ``error``). A call no response answers is
  kept, without a result;
- ``executableCode`` (``language``, ``code``): a ``"code_execution"`` call (the API's
  built-in code execution), its ``codeExecutionResult`` (``outcome``, ``output``) the first
  unanswered one's result, failed unless ``outcome`` is ``"OUTCOME_OK"``;
- ``inlineData``, ``fileData``, ``videoMetadata``, a lone ``thoughtSignature`` and the
  server-side tools' parts: not steps.

A model content's usage (a response's ``usageMetadata``) goes on its first step: the input is
``promptTokenCount``, the output ``candidatesTokenCount`` plus ``thoughtsTokenCount`` (the
thinking is output the model produced). What cannot be read is reported and skipped.
"""

from __future__ import annotations

from typing import Any, Dict, Iterable, Iterator, List, Optional, Tuple

from .conversation import USAGE_KEY, Conversation, conversations
from .decode import count, dumps, kind, optional_str
from .records import Run, Step, new_step, replaced
from .source import Report

__all__ = ["NAME", "field", "looks_like", "parts_text", "response_outcome", "runs"]

NAME = "gemini"
# The name sets are tuples: the values tested come from the trace, and may be lists, which a
# set cannot look up.
_ANSWERING = ("user", "function", "tool")
_ROLES = ("model", "system") + _ANSWERING
# The parts' kinds, by their name in the API and in the Python SDK's model_dump().
_TEXT = ("text", "text")
_CALL = ("functionCall", "function_call")
_RESPONSE = ("functionResponse", "function_response")
_CODE = ("executableCode", "executable_code")
_CODE_RESULT = ("codeExecutionResult", "code_execution_result")
_KINDS = (_TEXT, _CALL, _RESPONSE, _CODE, _CODE_RESULT)
_QUIET_PARTS = (
    "inlineData",
    "inline_data",
    "fileData",
    "file_data",
    "videoMetadata",
    "video_metadata",
    "thought",
    "thoughtSignature",
    "thought_signature",
    "mediaResolution",
    "media_resolution",
    "partMetadata",
    "part_metadata",
    "toolCall",
    "tool_call",
    "toolResponse",
    "tool_response",
)
_RESULT_KEYS = ("output", "result", "content")
_CODE_TOOL = "code_execution"


def field(record: Any, camel: str, snake: str) -> Any:
    """``record[camel]``, else ``record[snake]`` (the name the Python SDK's ``model_dump()``
    writes); None when ``record`` is not an object or neither is set."""
    if not isinstance(record, dict):
        return None
    found = record.get(camel)
    return found if found is not None else record.get(snake)


def parts_text(parts: Any) -> Optional[str]:
    """The text of a content's parts (a string is its own text), thoughts left out; None when
    there is none."""
    if isinstance(parts, str):
        return parts or None
    if isinstance(parts, dict):
        parts = [parts]
    if not isinstance(parts, list):
        return None
    texts = [_text(part) for part in parts]
    return "\n".join(text for text in texts if text) or None


def _text(part: Any) -> Optional[str]:
    # A part's text, unless it is the model's thinking.
    if not isinstance(part, dict) or part.get("thought") is True:
        return None
    text = part.get("text")
    return text if isinstance(text, str) else None


def response_outcome(response: Any) -> Tuple[Optional[str], Optional[str]]:
    """``(result_text, error)`` of a ``functionResponse``'s ``response``: the error's text for
    ``{"error": ...}``, the text of ``{"output" | "result" | "content": text}``, the compact
    JSON of any other response ("" for none)."""
    if response is None:
        return "", None
    if isinstance(response, dict):
        error = response.get("error")
        if error is not None:
            message = error.get("message") if isinstance(error, dict) else None
            return None, error if isinstance(error, str) else message if isinstance(message, str) else dumps(error)
        if len(response) == 1:
            ((key, value),) = response.items()
            if key in _RESULT_KEYS and isinstance(value, str):
                return value, None
    return (response if isinstance(response, str) else dumps(response)), None


def _usage_tokens(usage: Any) -> Tuple[Optional[int], Optional[int]]:
    """``(input_tokens, output_tokens)`` of a ``usageMetadata``: ``promptTokenCount``, and
    ``candidatesTokenCount`` plus ``thoughtsTokenCount``; a count that is not a non-negative
    integer is None."""
    if not isinstance(usage, dict):
        return None, None
    given = count(field(usage, "promptTokenCount", "prompt_token_count"))
    candidates = count(field(usage, "candidatesTokenCount", "candidates_token_count"))
    thoughts = count(field(usage, "thoughtsTokenCount", "thoughts_token_count"))
    produced = None if candidates is None and thoughts is None else (candidates or 0) + (thoughts or 0)
    return given, produced


class _Steps:
    """A conversation's steps as its contents are read, with the calls still waiting for their
    response: a response answers a call of the model content before it, so each model content
    starts the wait afresh (a call left unanswered keeps no result)."""

    def __init__(self, report: Report) -> None:
        self.report = report
        self.out: List[Step] = []
        # The calls waiting: (their index in out, name, id); the code runs apart, in order.
        self.calls: List[Tuple[int, str, Optional[str]]] = []
        self.code: List[int] = []

    def content(self, content: Any, where: str, line: Optional[int]) -> None:
        if not isinstance(content, dict):
            self.report(f"{where}: expected an object, got {kind(content)}", line)
            return
        role = content.get("role") or "user"  # the API reads a content without a role as the user's
        parts = content.get("parts")
        if not isinstance(parts, list):
            self.report(f"{where}.parts: expected an array, got {kind(parts)}", line)
        elif role == "model":
            self._model(content, parts, where, line)
        elif role in _ANSWERING:
            self._answers(parts, role, where, line)
        elif role != "system":
            self.report(f"{where}.role: unknown role {role!r}", line)

    def _model(self, content: Dict[str, Any], parts: List[Any], where: str, line: Optional[int]) -> None:
        self.calls.clear()
        self.code.clear()
        first = len(self.out)
        for number, part in enumerate(parts):
            at = f"{where}.parts[{number}]"
            part_kind, value = self._part(part, at, line)
            if part_kind is _CALL:
                self._call(value, at, line)
            elif part_kind is _CODE:
                self._code(value, line)
            elif part_kind is _CODE_RESULT:
                self._code_result(value, at, line)
            elif part_kind is _RESPONSE:
                self.report(f"{at}: a functionResponse in a model content", line)
        text = parts_text(parts)
        given, produced = _usage_tokens(content.get(USAGE_KEY))
        if len(self.out) > first:
            self.out[first] = replaced(self.out[first], thought=text, input_tokens=given, output_tokens=produced)
        else:
            self.out.append(
                new_step(None, None, None, None, None, None, False, "assistant", text, None, given, produced, line=line)
            )

    def _answers(self, parts: List[Any], role: str, where: str, line: Optional[int]) -> None:
        for number, part in enumerate(parts):
            at = f"{where}.parts[{number}]"
            part_kind, value = self._part(part, at, line)
            if part_kind is _RESPONSE:
                self._response(value, at, line)
            elif part_kind is _CODE_RESULT:
                self._code_result(value, at, line)
            elif part_kind is _CALL or part_kind is _CODE:
                self.report(f"{at}: a call in a {role} content", line)
        text = parts_text(parts) if role == "user" else None
        if text is not None:
            self.out.append(new_step(None, None, None, None, None, None, False, "user", text, line=line))

    def _part(self, part: Any, where: str, line: Optional[int]) -> Tuple[Optional[Tuple[str, str]], Any]:
        """The kind of a part and its value; (None, None) for a part that is no step."""
        if not isinstance(part, dict):
            self.report(f"{where}: expected an object, got {kind(part)}", line)
            return None, None
        for names in _KINDS:
            value = field(part, *names)
            if value is not None:
                return names, value
        unknown = [key for key, value in part.items() if value is not None and key not in _QUIET_PARTS]
        if unknown:
            self.report(f"{where}: unknown part {unknown[0]!r}", line)
        return None, None

    def _call(self, call: Any, where: str, line: Optional[int]) -> None:
        name = call.get("name") if isinstance(call, dict) else None
        if not isinstance(name, str):
            self.report(f"{where}: a functionCall without a name", line)
            return
        call_id = call.get("id")
        call_id = call_id if isinstance(call_id, str) else None
        self.calls.append((len(self.out), name, call_id))
        self.out.append(new_step(name, call.get("args"), call_id, None, None, None, False, line=line))

    def _response(self, response: Any, where: str, line: Optional[int]) -> None:
        response = response if isinstance(response, dict) else {}
        name = response.get("name")
        waiting = self._waiting(name, optional_str(response, "id"))
        if waiting is None:
            self.report(f"{where}: a functionResponse for {name!r}, which no call waits for", line)
            return
        index = self.calls.pop(waiting)[0]
        result, error = response_outcome(response.get("response"))
        self.out[index] = replaced(self.out[index], result_text=result, error=error, is_error=error is not None)

    def _waiting(self, name: Any, response_id: Optional[str]) -> Optional[int]:
        # By id when both have one; else the first waiting call of the name.
        if response_id is not None:
            for position, (_, _, call_id) in enumerate(self.calls):
                if call_id == response_id:
                    return position
        for position, (_, call_name, call_id) in enumerate(self.calls):
            if call_name == name and (call_id is None or response_id is None):
                return position
        return None

    def _code(self, code: Any, line: Optional[int]) -> None:
        code = code if isinstance(code, dict) else {}
        arguments = {"language": code.get("language"), "code": code.get("code")}
        self.code.append(len(self.out))
        self.out.append(new_step(_CODE_TOOL, arguments, optional_str(code, "id"), None, None, None, False, line=line))

    def _code_result(self, result: Any, where: str, line: Optional[int]) -> None:
        if not self.code:
            self.report(f"{where}: a codeExecutionResult with no executableCode before it", line)
            return
        index = self.code.pop(0)
        output = optional_str(result, "output")
        outcome = result.get("outcome") if isinstance(result, dict) else None
        failed = outcome is not None and outcome not in ("OUTCOME_OK", "OUTCOME_UNSPECIFIED")
        self.out[index] = replaced(self.out[index], result_text=output or "", is_error=failed)


def looks_like(value: Any) -> int:
    """2 when ``value`` has a mark only this format has (a request's ``contents``, a
    response's ``candidates``, a ``"model"`` content, a function call or response part), 1 for
    user contents another format could hold, 0 otherwise."""
    if isinstance(value, dict):
        request = value.get("request")
        if (
            isinstance(value.get("contents"), list)
            or isinstance(value.get("candidates"), list)
            or (isinstance(request, dict) and isinstance(request.get("contents"), list))
        ):
            return 2
        return _content_score(value) if "parts" in value else 0
    if not isinstance(value, list) or not value:
        return 0
    score = 1
    for content in value[:64]:
        found = _content_score(content)
        if not found:
            return 0
        score = max(score, found)
    return score


def _content_score(content: Any) -> int:
    if not isinstance(content, dict) or not isinstance(content.get("parts"), list):
        return 0
    role = content.get("role")
    if role == "model":
        return 2
    if role is not None and role not in _ROLES:
        return 0
    for part in content["parts"][:64]:
        if field(part, *_CALL) is not None or field(part, *_RESPONSE) is not None:
            return 2
    return 1


def runs(records: Iterable[Tuple[Optional[int], Any]], report: Report, source: Optional[str]) -> Iterator[Run]:
    """The runs of a file's records (see the module's documentation)."""
    read = lambda value, line: _conversation(value, line, report)  # noqa: E731
    for conversation in conversations(records, read, _follows):
        steps = _Steps(report)
        for index, content in enumerate(conversation.items):
            steps.content(content, f"contents[{index}]", conversation.line_of(index))
        yield Run(conversation.path, conversation.exit_status, tuple(steps.out), conversation.session_id, None, source, NAME)


def _follows(previous: Any, value: Any) -> bool:
    if not isinstance(value, dict):
        return False
    if "parts" in value:
        return True  # a history written one content a line
    # A response logged after the request it answers.
    return "candidates" in value and "contents" not in value and isinstance(previous, dict) and "contents" in previous


def _conversation(value: Any, line: Optional[int], report: Report) -> Optional[Conversation]:
    if isinstance(value, list):
        return Conversation(value, [0], [line])
    if not isinstance(value, dict):
        report(f"a conversation is a list of contents, a request, a response or one content, got {kind(value)}", line)
        return None
    if "parts" in value:
        return Conversation([value], [0], [line])
    # A batch prediction line holds a request and its response; other records, one of them.
    request = value.get("request", value)
    response = value.get("response", value)
    contents = request.get("contents") if isinstance(request, dict) else None
    candidates = field(response, "candidates", "candidates")
    if contents is not None and not isinstance(contents, list):
        report(f"contents: expected an array, got {kind(contents)}", line)
        return None
    if candidates is None:
        if contents is None:
            report("a conversation is a list of contents, a request, a response or one content: no contents or candidates", line)
            return None
        return Conversation(contents, [0], [line])
    if contents is None:
        history = field(response, "automaticFunctionCallingHistory", "automatic_function_calling_history")
        contents = history if isinstance(history, list) else []
    # The answer is appended to the request's list: the decoded record's own, which nothing else holds.
    status = _answer(response, candidates, contents, line, report)
    return Conversation(contents, [0], [line], None, status)


def _answer(response: Dict[str, Any], candidates: Any, contents: List[Any], line: Optional[int], report: Report) -> Optional[str]:
    """Append a response's first candidate's content to ``contents`` (with the response's
    usage) and return its finish reason."""
    if not isinstance(candidates, list):
        report(f"candidates: expected an array, got {kind(candidates)}", line)
        return None
    if not candidates:
        return None  # a blocked prompt has no candidate
    first = candidates[0]
    if not isinstance(first, dict):
        report(f"candidates[0]: expected an object, got {kind(first)}", line)
        return None
    content = first.get("content")
    if isinstance(content, dict):
        answer = dict(content)
        answer["role"] = answer.get("role") or "model"
        answer[USAGE_KEY] = field(response, "usageMetadata", "usage_metadata")
        contents.append(answer)
    elif content is not None:
        report(f"candidates[0].content: expected an object, got {kind(content)}", line)
    reason = field(first, "finishReason", "finish_reason")
    return reason if isinstance(reason, str) else None
