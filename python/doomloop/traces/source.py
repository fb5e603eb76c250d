"""Where the readers' records come from: a path, stdin or a binary file object, gzip or not,
read as JSON Lines with a bound on each line, or as one JSON document up to the same bound.

A line is read with ``readline(limit)``: an over-long line is reported and the rest of it is
read in blocks and dropped until its newline, so no line longer than the bound is ever held
whole. A file whose first two non-blank lines are not JSON, and which starts with ``[`` or
``{``, is one (pretty-printed) JSON document: it is read whole when it is at most the bound,
and reported otherwise.
"""

from __future__ import annotations

import gzip
import io
import os
import sys
from itertools import chain
from typing import IO, Any, Callable, Iterator, List, Optional, Tuple, Union

from .decode import JSONDecodeError, loads, not_json
from .errors import TraceFormatError

__all__ = ["MAX_LINE_BYTES", "Records", "Report", "Source", "decoded_line", "open_source"]

MAX_LINE_BYTES = 64 * 1024 * 1024
"""The default bound on one record: a line of JSON Lines, or a whole JSON document (64 MiB)."""

Source = Union[str, "os.PathLike[str]", IO[bytes]]
Report = Callable[[str, Optional[int]], None]
"""How a reader reports a malformed record it skips: ``report(problem, line)``."""

_GZIP_MAGIC = b"\x1f\x8b"
# The block size in which the rest of an over-long line is read and dropped.
_BLOCK = 1 << 20


class _Raw(io.RawIOBase):
    """A binary file object without ``peek`` (a BytesIO, a socket file) as a raw stream, so a
    BufferedReader can sit on it."""

    def __init__(self, stream: IO[bytes]) -> None:
        self._stream = stream

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        data = self._stream.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)


def open_source(source: Source) -> Tuple[IO[bytes], str, Callable[[], None]]:
    """``(stream, name, close)``: the decompressed byte stream of ``source``, the name its
    errors give (the path, ``"-"`` for stdin) and what to call when done (which closes only
    what this function opened). Raises :class:`TraceFormatError` for a file it cannot open."""
    owned: Optional[IO[bytes]] = None
    if isinstance(source, (str, os.PathLike)):
        name = os.fspath(source)
        if name == "-":
            stream: IO[bytes] = sys.stdin.buffer
        else:
            try:
                stream = owned = open(name, "rb")  # closed by the returned close
            except OSError as error:
                raise TraceFormatError(f"cannot read ({error.strerror or error})", name) from None
    elif isinstance(source, io.TextIOBase):
        raise TypeError("a trace file object must be opened in binary mode")
    elif hasattr(source, "read"):
        stream = source
        name = str(getattr(source, "name", "<stream>"))
    else:
        raise TypeError(f"a trace source is a path, '-' or a binary file object, not {type(source).__name__}")
    if not hasattr(stream, "peek"):
        stream = io.BufferedReader(_Raw(stream))
    try:
        head = stream.peek(2)[:2]
    except (OSError, ValueError) as error:
        if owned is not None:
            owned.close()
        raise TraceFormatError(f"cannot read ({error})", name) from None
    if head == _GZIP_MAGIC:
        stream = gzip.GzipFile(fileobj=stream, mode="rb")  # type: ignore[assignment]

    def close() -> None:
        if owned is not None:
            owned.close()

    return stream, name, close


class Records:
    """The decoded records of ``stream``, as ``(line, value)``: each non-blank line of JSON
    Lines with its 1-based number, or one JSON document with line None. A line that is not
    JSON, not UTF-8 or longer than ``max_line_bytes`` is reported and skipped.

    A reader that decodes lines itself (the event format's) takes the lines not decoded yet
    with :meth:`raw_lines`, once the format is known."""

    def __init__(self, stream: IO[bytes], report: Report, max_line_bytes: int = MAX_LINE_BYTES) -> None:
        self._stream = stream
        self._report = report
        self._max_line_bytes = max_line_bytes
        self._lines = _lines(stream, report, max_line_bytes)
        # Lines read ahead (to tell JSON Lines from one document) and not decoded yet.
        self._ahead: List[Tuple[int, bytes]] = []
        self._values: Optional[Iterator[Tuple[Optional[int], Any]]] = None
        self._document = False

    def __iter__(self) -> Iterator[Tuple[Optional[int], Any]]:
        # The generator itself: iterating costs no method call per record.
        if self._values is None:
            self._values = self._start()
        return self._values

    def raw_lines(self) -> Optional[Iterator[Tuple[int, bytes]]]:
        """The numbered lines not decoded yet, handed over (iterating the records yields
        nothing more); None when the stream is one JSON document."""
        iter(self)
        if self._document:
            return None
        self._values = iter(())
        ahead, self._ahead = self._ahead, []
        return chain(ahead, self._lines)

    def _start(self) -> Iterator[Tuple[Optional[int], Any]]:
        # The first two non-blank lines decide between JSON Lines and one document.
        held = self._ahead
        for number, raw in self._lines:
            held.append((number, raw))
            if _decodes(raw) or len(held) == 2:
                break
        if len(held) == 2 and not _decodes(held[0][1]) and not _decodes(held[1][1]) and held[0][1].lstrip()[:1] in (b"[", b"{"):
            self._document = True
            self._ahead = []
            return _document(held, self._stream, self._report, self._max_line_bytes)
        return self._decoded()

    def _decoded(self) -> Iterator[Tuple[Optional[int], Any]]:
        report = self._report
        for number, raw in self._unread():
            record = decoded_line(number, raw, report)
            if record is not None:
                yield record

    def _unread(self) -> Iterator[Tuple[int, bytes]]:
        # The lines read ahead, then the rest (each taken off before it is handed on, so that
        # raw_lines hands over exactly what is left). Not `yield from`: closing this generator
        # (dropped when raw_lines hands over) would close the line reader with it.
        ahead = self._ahead
        while ahead:
            yield ahead.pop(0)
        for line in self._lines:  # noqa: UP028 - see above
            yield line


def decoded_line(number: int, raw: bytes, report: Report) -> Optional[Tuple[int, Any]]:
    """``(number, value)`` of one line of JSON Lines; None for a line that is not JSON or not
    UTF-8, which is reported."""
    try:
        return number, loads(raw)
    except (JSONDecodeError, UnicodeDecodeError, RecursionError) as error:
        report(not_json(raw, error), number)
        return None


def _decodes(raw: bytes) -> bool:
    try:
        loads(raw)
    except (JSONDecodeError, UnicodeDecodeError, RecursionError):
        return False
    return True


def _lines(stream: IO[bytes], report: Report, max_line_bytes: int) -> Iterator[Tuple[int, bytes]]:
    """The non-blank lines of ``stream`` with their numbers; an over-long line is reported and
    dropped block by block, never held whole."""
    readline = stream.readline
    limit = max_line_bytes + 1
    number = 0
    try:
        while True:
            raw = readline(limit)
            if not raw:
                return
            number += 1
            if len(raw) == limit and not raw.endswith(b"\n"):
                dropped = len(raw)
                while True:
                    rest = readline(_BLOCK)
                    dropped += len(rest)
                    if not rest or rest.endswith(b"\n"):
                        break
                report(f"line longer than {max_line_bytes} bytes ({dropped} bytes; skipped)", number)
                continue
            if raw.isspace():
                continue
            yield number, raw
    except (OSError, EOFError, gzip.BadGzipFile) as error:
        # A truncated or corrupt gzip stream, or a failing read: what was read stands.
        report(f"cannot read past this point ({error})", number + 1)


def _document(
    held: List[Tuple[int, bytes]], stream: IO[bytes], report: Report, max_line_bytes: int
) -> Iterator[Tuple[Optional[int], Any]]:
    # The held lines start the document; the stream's position is just after them.
    parts = [raw for _, raw in held]
    size = sum(map(len, parts))
    try:
        rest = stream.read(max_line_bytes - size + 1)
    except (OSError, EOFError, gzip.BadGzipFile) as error:
        report(f"cannot read the JSON document ({error})", None)
        return
    if size + len(rest) > max_line_bytes:
        report(f"a JSON document longer than {max_line_bytes} bytes (write it as JSON Lines, or raise max_line_bytes)", None)
        return
    document = b"".join(parts) + rest
    try:
        value = loads(document)
    except (JSONDecodeError, UnicodeDecodeError, RecursionError) as error:
        line = getattr(error, "lineno", None)
        report(not_json(document, error), held[0][0] + line - 1 if line else None)
        return
    yield None, value
