"""What the message-list readers (OpenAI chat, OpenAI Responses, Anthropic, Gemini) share: the
text of a message's content, a request log's records joined into one conversation, and the
skip report of the per-request functions.

A request log writes one request per line, and each request re-sends the conversation so
far. So a record whose messages begin with the previous record's messages continues that
record's run (its new messages are added): the run is the longest conversation, read once.
The check is on the first and the last message the two have in common (constant time; a log
of unrelated conversations that share their first message and the previous one's last is
read as one). A re-sent message matches the logged one on its role and content, as a
request re-sends a response without its id and usage.
"""

from __future__ import annotations

from bisect import bisect_right
from typing import Any, Callable, Iterable, Iterator, List, NamedTuple, Optional, Tuple

from .errors import TraceFormatError
from .source import Report

__all__ = ["USAGE_KEY", "Conversation", "content_text", "conversations", "report_to"]

USAGE_KEY = "\x00usage"
"""The key under which a reader keeps a response's usage on the first item (message, content)
it produced, for the step made of that item: no item of any format has it."""


def content_text(content: Any, types: Tuple[str, ...] = ("text",)) -> Optional[str]:
    """The text of a message's content: the string itself, or the text of the parts of the
    given types joined by newlines; None when there is none."""
    if isinstance(content, str):
        return content or None
    if not isinstance(content, list):
        return None
    texts = [
        part if isinstance(part, str) else part.get("text")
        for part in content
        if isinstance(part, str) or (isinstance(part, dict) and part.get("type") in types)
    ]
    return "\n".join(text for text in texts if isinstance(text, str) and text) or None


class Conversation(NamedTuple):
    """One conversation read from one record or more."""

    items: List[Any]
    """The messages (or items), in order."""
    starts: List[int]
    """The index in ``items`` where each record's new messages start (ascending)."""
    lines: List[Optional[int]]
    """The line of each of those records."""
    session_id: Optional[str] = None
    exit_status: Optional[str] = None
    path: Optional[str] = None
    text_actions: bool = False
    """Whether an assistant message's one bash code block is its action (a text-based
    mini-swe-agent trajectory)."""

    def line_of(self, index: int) -> Optional[int]:
        """The line of the record that first held ``items[index]``."""
        return self.lines[bisect_right(self.starts, index) - 1]


def conversations(
    records: Iterable[Tuple[Optional[int], Any]],
    read: Callable[[Any, Optional[int]], Optional[Conversation]],
    linked: Optional[Callable[[Any, Any], bool]] = None,
) -> Iterator[Conversation]:
    """Yield the conversations of ``records``: ``read(value, line)`` makes one of a record
    (None for a record it reported and skipped); a record that re-sends the previous one's
    messages continues it, and so does one ``linked(previous_value, value)`` says follows
    the previous (its items are appended)."""
    current: Optional[Conversation] = None
    previous: Any = None
    for line, value in records:
        read_now = read(value, line)
        if read_now is None:
            continue
        # The conversation's items grow in place: a decoded record's list, which nothing else holds.
        if current is not None and _extends(current.items, read_now.items):
            # The messages logged before stay (a logged response has its usage; its re-sent
            # copy has not): only the new ones are added.
            current.starts.append(len(current.items))
            current.lines.append(line)
            current.items.extend(read_now.items[len(current.items) :])
            current = current._replace(exit_status=read_now.exit_status or current.exit_status)
        elif current is not None and linked is not None and linked(previous, value):
            current.starts.append(len(current.items))
            current.lines.append(line)
            current.items.extend(read_now.items)
            current = current._replace(exit_status=read_now.exit_status or current.exit_status)
        else:
            if current is not None:
                yield current
            current = read_now
        previous = value
    if current is not None:
        yield current


def _extends(old: List[Any], new: List[Any]) -> bool:
    return bool(old) and len(new) > len(old) and _same(new[0], old[0]) and _same(new[len(old) - 1], old[-1])


def _same(resent: Any, logged: Any) -> bool:
    # A request re-sends a logged response as a plain message: its role and content (a Gemini
    # content's parts), without the response's id, model and usage.
    if resent == logged:
        return True
    return (
        isinstance(resent, dict)
        and isinstance(logged, dict)
        and "role" in resent
        and resent.get("role") == logged.get("role")
        and resent.get("content") == logged.get("content")
        and resent.get("parts") == logged.get("parts")
    )


def report_to(on_skip: Optional[Callable[[TraceFormatError], None]]) -> Report:
    """The report of a per-request function: each problem to ``on_skip`` (nothing without
    one); it never raises."""

    def report(problem: str, line: Optional[int]) -> None:
        if on_skip is not None:
            on_skip(TraceFormatError(problem, None, line))

    return report
