"""An export's bytes with every JSON string cut at a ceiling before any parser sees them.

A turn longer than a memory may be is cut anyway (``chats.MAX_TURN_CHARS``), but only after the
parser has built it whole: ijson's C parser took 4.3 s for one 32 MB turn (two passes, the depth
check's and the import's), 8x the time of an 8 MB one, and a 256 MiB string in a zip bomb ran past
300 s. ``ClippedStrings`` wraps the byte stream: a string longer than ``limit`` bytes keeps its first
``limit`` (cut at a character's start, never inside an escape), ends in "…", and the rest is
skipped as it streams by; ``clipped`` counts them. Time and memory then grow with the file's size
alone. JSON lines work the same: a newline never stands inside a JSON string.
"""

from __future__ import annotations

import io
import re
from typing import IO

CUT = "…".encode()
CHUNK_BYTES = 1 << 20
# A string's body, up to its closing quote (or where it is cut): plain bytes and whole escapes.
_BODY = re.compile(rb'[^"\\]*(?:(?:\\u[0-9a-fA-F]{4}|\\[^u])[^"\\]*)*')
_ESCAPE = len(rb"\uXXXX")  # the longest escape
_HIGH_SURROGATE = re.compile(rb"\\u[dD][89abAB][0-9a-fA-F]{2}\Z")


class ClippedStrings(io.RawIOBase):
    """``raw`` (JSON or JSON lines), each string longer than ``limit`` bytes cut there."""

    def __init__(self, raw: IO[bytes], limit: int) -> None:
        self._raw = raw
        self._limit = limit
        self._pending = b""  # read, not scanned yet: a string that goes on past what was read
        self._out = bytearray()  # scanned, not handed out yet
        self._skipping = False  # inside a string that was cut: its bytes are dropped
        self._eof = False
        self.clipped = 0  # strings cut

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        while not self._out and not self._eof:
            self._fill()
        n = min(len(buffer), len(self._out))
        buffer[:n] = self._out[:n]
        del self._out[:n]
        return n

    def _fill(self) -> None:
        data = self._raw.read(CHUNK_BYTES)
        if not data:
            self._eof = True
            self._out += self._pending if not self._skipping else b""  # broken off: the parser says so
            self._pending = b""
            return
        buffer, self._pending = self._pending + data, b""
        self._scan(buffer)

    def _scan(self, buffer: bytes) -> None:
        out, n, limit = self._out, len(buffer), self._limit
        pos = 0
        if self._skipping:
            pos = self._skip(buffer, 0)
            if self._skipping:
                return
        while pos < n:
            quote = buffer.find(b'"', pos)
            if quote < 0:
                out += buffer[pos:]
                return
            out += buffer[pos:quote]
            start = quote + 1
            stop = min(n, start + limit)
            end = _body_end(buffer, start, stop)
            if end < n and buffer[end] == 0x22:  # closed within the limit
                out += buffer[quote:end + 1]
                pos = end + 1
            elif start + limit < n and end > start + limit - _ESCAPE:  # longer: keep its start, skip the rest
                cut = end  # (before an escape the limit would cut in two)
                while cut > start and buffer[cut] & 0xC0 == 0x80:  # not inside a UTF-8 character
                    cut -= 1
                if _HIGH_SURROGATE.search(buffer, start, cut):  # not half of a surrogate pair
                    cut -= 6
                out += buffer[quote:cut] + CUT
                self.clipped += 1
                self._skipping = True
                pos = self._skip(buffer, cut)
                if self._skipping:
                    return
            elif stop == n and end > n - _ESCAPE:  # the read ended inside it: scan it whole with the next
                self._pending = buffer[quote:]
                return
            else:  # not a JSON string (a bad escape): passed on as it is, for the parser to name
                out += buffer[quote:end + 1]
                pos = end + 1

    def _skip(self, buffer: bytes, pos: int) -> int:
        """Drop the cut string's bytes from ``pos``; past its closing quote when it is here."""
        while True:
            end = _body_end(buffer, pos, len(buffer))
            if end == len(buffer):
                return end
            if buffer[end] == 0x22:
                self._out += b'"'
                self._skipping = False
                return end + 1
            if len(buffer) - end < _ESCAPE:  # an escape the read cut in two: read on
                self._pending = buffer[end:]
                return len(buffer)
            pos = end + 1  # a bad escape in the dropped part: dropped with it


def _body_end(buffer: bytes, start: int, stop: int) -> int:
    """Where a string's body that starts at ``start`` ends, looking no further than ``stop``."""
    found = _BODY.match(buffer, start, stop)
    return found.end() if found else start  # (it always matches: the body may be empty)
