"""Reader of ``codex exec --json`` output (format ``"codex-exec"``): the JSON Lines of events
Codex CLI prints when it runs without its UI (what CI jobs save).

Each line is an event ``{"type": T, ...}``:

- ``thread.started`` (``thread_id``): a run begins, the thread its ``session_id``; a file
  holding several threads is several runs;
- ``turn.started``: a turn begins with the prompt sent, a ``"user"`` step (the events do not
  hold its text); ``turn.completed`` (``usage``: ``input_tokens``, ``cached_input_tokens``,
  ``output_tokens``) ends it, its usage (the whole turn's) on the turn's first step after the
  prompt, and ``turn.failed`` (``error.message``) ends it failed: the run's ``exit_status`` is
  its last turn's ``"completed"`` or ``"failed"``;
- ``item.completed`` (``item``: ``{"id", "type", ...}``) is a step, by the item's type:

  - ``command_execution`` (``command``, ``aggregated_output``, ``exit_code``, ``status``): a
    call of the tool ``shell``, arguments ``{"command": command}``, its result the output,
    ``exit_code`` the ``returncode`` (nonzero, or the status ``failed`` or ``declined``, is an
    error);
  - ``file_change`` (``changes``: ``[{"path", "kind"}]``, ``status``): a call of
    ``apply_patch``, arguments ``{"changes": changes}``, without a result; ``failed`` is an
    error;
  - ``mcp_tool_call`` (``server``, ``tool``, ``arguments``, ``result`` or ``error``): a call of
    ``{server}.{tool}``, its result the text of the result's content;
  - ``agent_message`` (``text``): an ``"assistant"`` step;
  - ``reasoning``, ``web_search``, ``todo_list``, ``error`` and the kinds later versions add
    are not steps;

- ``item.started`` and ``item.updated`` (an item in progress) and the other events are not
  steps: an item is read once, completed.

The events carry no times. Each turn's steps are held until the turn ends (its usage comes
last); a run is yielded when the next thread starts or the file ends. A line that cannot be
read is reported and skipped.
"""

from __future__ import annotations

from typing import Any, Dict, Iterable, Iterator, List, Optional, Tuple

from .decode import dumps, kind, optional_str, tokens
from .records import Run, Step, new_step, replaced
from .source import Report

__all__ = ["NAME", "looks_like", "runs"]

NAME = "codex-exec"
# The name sets are tuples: the values tested come from the trace, and may be lists, which a
# set cannot look up.
_EVENTS = (
    "thread.started",
    "turn.started",
    "turn.completed",
    "turn.failed",
    "item.started",
    "item.updated",
    "item.completed",
)
_FAILED = ("failed", "declined")


def looks_like(value: Any) -> int:
    """2 for an event only this format has (``thread.started``, ``turn.*``, ``item.*``), 1 for
    an ``error`` event (``{"type": "error", "message"}``), 0 otherwise."""
    if not isinstance(value, dict):
        return 0
    event = value.get("type")
    if event in _EVENTS:
        return 2
    return 1 if event == "error" and isinstance(value.get("message"), str) and len(value) == 2 else 0


class _Thread:
    """One run's steps as they are read: those of the turns ended, and the open turn's."""

    def __init__(self, thread_id: Optional[str]) -> None:
        self.thread_id = thread_id
        self.steps: List[Step] = []
        self.turn: List[Step] = []
        self.exit_status: Optional[str] = None

    def end_turn(self, usage: Any, status: Optional[str]) -> None:
        given, produced = tokens(usage)
        if given is not None or produced is not None:
            # The turn's usage on its first step after the prompt, as the other readers put a
            # response's usage on the first step it produced.
            for index, step in enumerate(self.turn):
                if step.kind != "user":
                    self.turn[index] = replaced(step, input_tokens=given, output_tokens=produced)
                    break
        self.steps.extend(self.turn)
        self.turn = []
        self.exit_status = status or self.exit_status

    def run(self, source: Optional[str]) -> Run:
        self.end_turn(None, None)
        return Run(None, self.exit_status, tuple(self.steps), self.thread_id, None, source, NAME)


def runs(records: Iterable[Tuple[Optional[int], Any]], report: Report, source: Optional[str]) -> Iterator[Run]:
    """The runs of a file's records (see the module's documentation)."""
    thread: Optional[_Thread] = None
    for line, value in records:
        if not isinstance(value, dict):
            report(f"an event is an object, got {kind(value)}", line)
            continue
        event = value.get("type")
        if event == "thread.started":
            if thread is not None:
                yield thread.run(source)
            thread = _Thread(optional_str(value, "thread_id"))
            continue
        if thread is None:
            thread = _Thread(None)
        if event == "turn.started":
            thread.end_turn(None, None)  # a turn the events never ended
            thread.turn.append(new_step(None, None, None, None, None, None, False, "user", line=line))
        elif event == "turn.completed":
            thread.end_turn(value.get("usage"), "completed")
        elif event == "turn.failed":
            thread.end_turn(None, "failed")
        elif event == "item.completed":
            item = value.get("item")
            if not isinstance(item, dict):
                report(f"item: expected an object, got {kind(item)}", line)
                continue
            step = _step(item, line)
            if step is not None:
                thread.turn.append(step)
    if thread is not None:
        yield thread.run(source)


def _step(item: Dict[str, Any], line: Optional[int]) -> Optional[Step]:
    type_ = item.get("type")
    call_id = optional_str(item, "id")
    status = item.get("status")
    if type_ == "command_execution":
        code = item.get("exit_code")
        returncode = code if type(code) is int else None
        failed = (returncode is not None and returncode != 0) or status in _FAILED
        output = optional_str(item, "aggregated_output")
        return new_step("shell", {"command": item.get("command")}, call_id, None, output, returncode, failed, line=line)
    if type_ == "file_change":
        failed = status == "failed"
        error = "the patch failed" if failed else None
        return new_step(
            "apply_patch", {"changes": item.get("changes")}, call_id, None, None, None, failed, error=error, line=line
        )
    if type_ == "mcp_tool_call":
        return _mcp_step(item, call_id, line)
    if type_ == "agent_message":
        return new_step(None, None, None, None, None, None, False, "assistant", optional_str(item, "text"), line=line)
    return None  # reasoning, web searches, the to-do list, errors and kinds later versions add


def _mcp_step(item: Dict[str, Any], call_id: Optional[str], line: Optional[int]) -> Step:
    server, tool = optional_str(item, "server"), optional_str(item, "tool")
    name = f"{server}.{tool}" if server and tool else tool or server or "mcp"
    failure = item.get("error")
    if isinstance(failure, dict):
        message = optional_str(failure, "message") or "the tool call failed"
        return new_step(name, item.get("arguments"), call_id, None, None, None, True, error=message, line=line)
    result = item.get("result")
    content = result.get("content") if isinstance(result, dict) else None
    text = _content_text(content) if isinstance(content, list) else None
    return new_step(name, item.get("arguments"), call_id, None, text, None, item.get("status") == "failed", line=line)


def _content_text(content: List[Any]) -> str:
    # An MCP result's content blocks: the text of the text blocks, the others as JSON.
    return "\n".join(
        block["text"] if isinstance(block, dict) and isinstance(block.get("text"), str) else dumps(block) for block in content
    )
