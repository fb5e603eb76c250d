"""One proxied conversation: a :class:`~doomloop.Monitor` that also keeps how much of the
history the client re-sends on every request it has already seen (a gateway registry keeps
it, ``SessionRegistry(monitor_class=Conversation)``, and its snapshot carries the cursor).

A client re-sends the whole history on every request. :meth:`Conversation.observe` feeds the
monitor only what is new: the items past the ones it read last time, when the history still
ends, at that point, with the item it ended with (checked on that one item, so a resent
request costs the same however long the history is). Each tool call is recorded once, by its
id. A history that shrank, or whose item at that point changed, was compacted (cut or
summarised): the monitor records a compaction, which arms the post-compaction guard, and the
history is read again for calls it has not seen. No litellm in here: the guardrail and the
benchmarks drive it with request bodies.
"""

from __future__ import annotations

import json
from typing import Any, Callable, Dict, List, Optional

from ...findings import CRITICAL, Finding
from ...monitor import Monitor
from ...traces import Step

__all__ = ["MAX_CALL_IDS", "Conversation", "Observed"]

MAX_CALL_IDS = 4096
"""Call ids remembered per conversation (the oldest are forgotten first): a call older than
this many calls that comes back after a compaction is recorded again."""

Steps = Callable[[List[Any]], List[Step]]
"""Reads a slice of a request's history into :class:`~doomloop.traces.Step` records."""


class Observed:
    """What one request's new history made the monitor find."""

    __slots__ = ("findings", "blocked", "compacted", "new_items")

    def __init__(self) -> None:
        self.findings: List[Finding] = []
        self.blocked: Optional[Finding] = None
        """The first critical finding, which vetoes the request (a blocked tool call, the
        guard's abort, a warned loop that went on and was stopped), or None."""
        self.compacted = False
        self.new_items = 0


def mark(item: Any) -> str:
    """A short fingerprint of one history item, cheap on long contents: its role or type, its
    ids, its content's length and ends."""
    if not isinstance(item, dict):
        return repr(item)[:200]
    content = item.get("content")
    text = content if isinstance(content, str) else json.dumps(content, sort_keys=True, default=str)
    calls = item.get("tool_calls")
    ids = ",".join(str(call.get("id")) for call in calls if isinstance(call, dict)) if isinstance(calls, list) else ""
    name = item.get("tool_call_id") or item.get("call_id") or item.get("id") or ""
    return f"{item.get('role') or item.get('type')}|{name}|{ids}|{len(text)}|{text[:48]}|{text[-48:]}"


class Conversation(Monitor):
    """A monitor with the cursor of what of the history it has read (see the module); its
    constructor is :class:`~doomloop.Monitor`'s."""

    __slots__ = ("count", "last", "calls", "user", "answer")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.count = 0
        """Items of the history read so far."""
        self.last = ""
        """The mark of the last item read."""
        self.calls: Dict[str, bool] = {}
        """Call ids recorded (insertion-ordered, bounded), each with whether its result was."""
        self.user = ""
        """The text of the last user message recorded (a new turn is a different one)."""
        self.answer: Optional[str] = None
        """The answer recorded from the response, not yet seen back in the history."""

    def observe(self, items: List[Any], read: Steps) -> Observed:
        """Feed the monitor what ``items`` (a request's whole history) holds that it has not
        seen. ``read`` turns a slice of the history into steps (it never raises)."""
        observed = Observed()
        count = self.count
        size = len(items)
        at_cursor = mark(items[count - 1]) if 0 < count <= size else None
        if count and at_cursor != self.last:
            observed.compacted = True
            observed.findings += self.record_compaction()
            self._feed(read(items), observed, replayed=True)
        elif size > count:
            observed.new_items = size - count
            self._feed(read(items[count:]), observed, replayed=False)
        elif size == count:
            # Resent unchanged: nothing to read, and the cursor's mark is the one just checked.
            return observed
        self.count = size
        self.last = mark(items[-1]) if items else ""
        observed.blocked = next((finding for finding in observed.findings if finding.level == CRITICAL), None)
        return observed

    def _feed(self, steps: List[Step], observed: Observed, replayed: bool) -> None:
        monitor = self
        found = observed.findings
        last = len(steps) - 1
        for position, step in enumerate(steps):
            kind = step.kind
            if kind == "tool":
                self._tool(step, observed)
            elif kind == "user":
                text = step.text or ""
                # A compacted history is read again for its calls; only a user message at its
                # end that differs from the last one recorded is a new turn.
                if not replayed or (position == last and text != self.user):
                    self.user = text
                    found += monitor.record_user_message(text)
            elif kind == "assistant":
                self._answer(step.text, found, replayed)
            elif kind == "compaction" and not replayed:
                observed.compacted = True
                found += monitor.record_compaction()

    def _answer(self, text: Optional[str], found: List[Finding], replayed: bool) -> None:
        if not text:
            return
        if text == self.answer:
            # The response recorded it already (the post-call hooks).
            self.answer = None
        elif not replayed:
            found += self.record_response(text)

    def _tool(self, step: Step, observed: Observed) -> None:
        monitor = self
        found = observed.findings
        call_id = step.call_id
        has_result = step.result_text is not None or step.error is not None
        seen = None if call_id is None else self.calls.get(call_id)
        if seen is None:
            self._answer(step.thought, found, False)
            decision = monitor.before_tool_call(step.tool or "", step.arguments, call_id=call_id)
            found += decision.findings
        elif seen or not has_result:
            return
        if call_id is not None:
            calls = self.calls
            calls[call_id] = has_result
            if len(calls) > MAX_CALL_IDS:
                del calls[next(iter(calls))]
        if has_result:
            after = monitor.after_tool_call(
                step.tool or "",
                step.arguments,
                result=step.result_text,
                error=step.error,
                call_id=call_id,
                success=not step.is_error and step.error is None,
            )
            found += after

    def record_answer(self, text: str) -> List[Finding]:
        """The response's answer (its text): recorded now, and not again when the client
        sends it back in the history."""
        self.answer = text
        return self.record_response(text)

    # --- snapshots (for a shared store): the cursor rides in the monitor's ----------------------

    def _extra_state(self) -> Any:
        return {
            "count": self.count,
            "last": self.last,
            "calls": list(self.calls.items()),
            "user": self.user,
            "answer": self.answer,
        }

    def _restore_extra(self, extra: Any) -> None:
        self.count = int(extra["count"])
        self.last = str(extra["last"])
        self.calls = {str(call_id): bool(done) for call_id, done in extra["calls"]}
        self.user = str(extra["user"])
        answer = extra["answer"]
        self.answer = None if answer is None else str(answer)
