"""Server-sent events read off the raw bytes of a stream, for a gateway that relays an upstream's
SSE body as it arrives (the LiteLLM proxy does this for Anthropic's ``/v1/messages``): the body
comes in pieces cut anywhere, even inside a frame.

:class:`SseFrames` splits the bytes into whole frames (a frame ends at a blank line, ``\\n\\n``
or ``\\r\\n\\r\\n``) and decodes the JSON of the ``data:`` lines of the frames that can carry
text. Each frame's bytes are handed back exactly as they came, so a relay that yields them in
order sends the upstream's body unchanged, only never a partial frame (a frame is held until its
end arrives). A frame longer than :data:`MAX_FRAME` is passed on unread, as it arrives, and
counted in :attr:`SseFrames.unread`: memory stays bounded and nothing is lost.
"""

from __future__ import annotations

import re
from typing import Any, List, Optional, Tuple

from ..traces.decode import JSONDecodeError, loads

__all__ = ["MAX_FRAME", "Frame", "SseFrames"]

MAX_FRAME = 1 << 20
"""The longest frame (bytes) held back to be read; a longer one passes through unread."""

_END = re.compile(rb"\r?\n\r?\n")

Frame = Tuple[bytes, Optional[Any]]
"""A frame's bytes (its terminating blank line included) and the JSON of its data, or None
(no data, ``[DONE]``, not JSON, not wanted, or too long to read)."""


class SseFrames:
    """Whole SSE frames out of a stream's pieces; ``wanted``: the data of only the frames
    holding these bytes are decoded (the rest pass on as bytes)."""

    __slots__ = ("_pending", "_passing", "_wanted", "unread")

    def __init__(self, wanted: bytes = b"") -> None:
        self._pending = b""
        self._passing = False
        self._wanted = wanted
        self.unread = 0
        """Frames passed on unread because they were longer than :data:`MAX_FRAME`."""

    def feed(self, data: bytes) -> List[Frame]:
        """The frames ``data`` completes, in order, each with its decoded data. Bytes of an
        over-long frame come back as they arrive, as frames of their own with no data."""
        pending = self._pending + data if self._pending else data
        frames: List[Frame] = []
        start = 0
        if self._passing:
            # The rest of an over-long frame, up to its end, goes on unread.
            end = _END.search(pending)
            if end is None:
                self._pending = b""
                return [(pending, None)] if pending else frames
            frames.append((pending[: end.end()], None))
            start = end.end()
            self._passing = False
        wanted = self._wanted
        for end in _END.finditer(pending, start):
            frame = pending[start : end.end()]
            frames.append((frame, _data(frame) if wanted in frame else None))
            start = end.end()
        rest = pending[start:]
        if len(rest) > MAX_FRAME:
            self.unread += 1
            self._passing = True
            frames.append((rest, None))
            rest = b""
        self._pending = rest
        return frames

    def flush(self) -> bytes:
        """What is held of an unfinished frame at the end of the stream (passed on as it is)."""
        rest, self._pending = self._pending, b""
        return rest


def _data(frame: bytes) -> Optional[Any]:
    parts = [line[5:] for line in frame.splitlines() if line.startswith(b"data:")]
    if not parts:
        return None
    data = b"\n".join(part[1:] if part.startswith(b" ") else part for part in parts)
    if data == b"[DONE]":
        return None
    try:
        return loads(data)
    except (JSONDecodeError, RecursionError, UnicodeDecodeError):
        return None
