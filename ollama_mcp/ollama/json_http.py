"""A lean HTTP/1.1 client for the JSON calls a user waits on: ``/api/embed`` (every store and every
search) and ``/api/show`` (once, before the first), to a plain-HTTP Ollama without a proxy.

Why not the ``ollama`` client (httpx) for these: measured against the same local server, a call
through it costs 2.4 ms more than this one (3.7 ms against 1.3 ms a call, bench/README.md #15) out
of the 5 ms a store or a search may add to its embedding call; and importing it (with httpx and
its pydantic types) is about 150 ms on the path from a restart to the first search. The ``ollama``
client still makes every other call (chat, the model list), and every call to an HTTPS host or
through a proxy (``usable_for``).

What it does: kept-alive connections (one per concurrent request, reused), replies framed by
Content-Length, chunked transfer encoding (what Ollama's Go server sends for replies over 2 KB)
or the connection's end. A kept-alive connection that the server closed while idle (Ollama does)
fails before the first byte of the reply; the request is then sent once more on a new connection,
which is safe for the calls made here (they change nothing). A request cut short (a timeout, a
cancelled search) closes its connection. Timeouts bound a whole call in ``ollama_client``.
"""

from __future__ import annotations

import json
import os
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import anyio
from anyio.abc import SocketStream
from anyio.streams.buffered import BufferedByteReceiveStream

DEFAULT_PORT = 11434
MAX_HEAD = 64 * 1024
MAX_BODY = 256 * 1024 * 1024  # a batch of long vectors is a few MB of JSON
# Requests at once (a burst of stores queues here, as in httpx's pool, not in 300 sockets to an
# Ollama that answers a few at a time anyway).
MAX_CONNECTIONS = 16
_PROXY_VARIABLES = ("http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY")


class StatusError(Exception):
    """The server answered with an HTTP status of 300 or more; ``error`` is its ``{"error": ...}``
    text (or the body, when it is not that JSON)."""

    def __init__(self, status: int, error: str) -> None:
        super().__init__(f"HTTP {status}: {error}")
        self.status = status
        self.error = error


class ConnectFailed(ConnectionError):
    """No connection could be made (refused, unreachable, unknown host)."""


class BrokenReply(Exception):
    """The connection broke during the exchange, or what came back is not an HTTP reply."""


@dataclass(frozen=True)
class Base:
    """Where requests go: OLLAMA_HOST read as the ``ollama`` client reads it."""

    scheme: str
    host: str  # without brackets
    port: int
    path: str  # "" or "/prefix"

    @property
    def host_header(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"


def parse_host(value: str | None) -> Base:
    """``OLLAMA_HOST`` as ``ollama._client._parse_host`` reads it: scheme http unless given, port
    11434 unless given (80/443 when only a scheme is), an optional path prefix."""
    value, port = value or "", DEFAULT_PORT
    scheme, _, rest = value.partition("://")
    if not rest:
        scheme, rest = "http", value
    elif scheme == "http":
        port = 80
    elif scheme == "https":
        port = 443
    split = urllib.parse.urlsplit(f"{scheme}://{rest}")
    host = split.hostname or "127.0.0.1"
    path = split.path.strip("/")
    return Base(scheme, host, split.port or port, f"/{path}" if path else "")


def usable_for(base: Base, environ: Mapping[str, str] = os.environ) -> bool:
    """Whether this client can reach ``base``: plain HTTP, and no proxy variable applies to it
    (httpx honours those; a user behind one keeps the ``ollama`` client)."""
    if base.scheme != "http":
        return False
    if not any(environ.get(name) for name in _PROXY_VARIABLES):
        return True
    import urllib.request  # noqa: PLC0415  (only with a proxy variable set)

    bypass = urllib.request.proxy_bypass_environment  # type: ignore[attr-defined]
    return bool(bypass(base.host, {"no": environ.get("no_proxy") or environ.get("NO_PROXY") or ""}))


class _Connection:
    def __init__(self, stream: SocketStream) -> None:
        self.stream = stream
        self.reader = BufferedByteReceiveStream(stream)


class JsonHttp:
    """JSON requests to one plain-HTTP base over kept-alive connections; see the module's docstring."""

    def __init__(self, base: Base, *, connect_timeout: float, headers: dict[str, str] | None = None) -> None:
        self.base = base
        self._connect_timeout = connect_timeout
        extra = "".join(f"{name}: {value}\r\n" for name, value in (headers or {}).items())
        self._head = (
            f"Host: {base.host_header}\r\nUser-Agent: ollama-mcp\r\nAccept: application/json\r\n"
            f"Content-Type: application/json\r\n{extra}"
        )
        self._idle: list[_Connection] = []
        self._slots = anyio.Semaphore(MAX_CONNECTIONS)

    async def request(self, method: str, path: str, payload: Any = None) -> Any:
        """The decoded JSON reply; ``StatusError`` for a status of 300 or more."""
        async with self._slots:
            return await self._request(method, path, payload)

    async def _request(self, method: str, path: str, payload: Any) -> Any:
        body = b"" if payload is None else json.dumps(payload).encode()
        message = (
            f"{method} {self.base.path}{path} HTTP/1.1\r\n{self._head}Content-Length: {len(body)}\r\n\r\n"
        ).encode("latin-1") + body
        try:
            connection = self._idle.pop() if self._idle else await self._connect()
            status, data, reusable = await self._exchange(connection, message)
        except _ClosedWithoutAnswer:
            # Ollama closes kept-alive connections it deems idle: the others idle here likely went
            # the same way. Once more, on a new connection.
            await self.aclose()
            connection = await self._connect()
            try:
                status, data, reusable = await self._exchange(connection, message)
            except _ClosedWithoutAnswer as exc:
                raise BrokenReply("the server closed the connection twice without answering") from exc
        if reusable:
            self._idle.append(connection)
        else:
            await anyio.aclose_forcefully(connection.stream)
        if status >= 300:
            raise StatusError(status, _error_text(data))
        return json.loads(data)

    async def aclose(self) -> None:
        idle, self._idle = self._idle, []
        for connection in idle:
            await anyio.aclose_forcefully(connection.stream)

    async def _connect(self) -> _Connection:
        try:
            with anyio.fail_after(self._connect_timeout):
                stream = await anyio.connect_tcp(self.base.host, self.base.port)
        except OSError as exc:
            raise ConnectFailed(f"cannot connect to {self.base.host_header}: {exc}") from exc
        return _Connection(stream)

    async def _exchange(self, connection: _Connection, message: bytes) -> tuple[int, bytes, bool]:
        """Sends ``message`` and reads the reply: (status, body, whether the connection can be
        reused). Any failure closes the connection."""
        reader = connection.reader
        answered = False
        try:
            await connection.stream.send(message)
            head = await reader.receive_until(b"\r\n\r\n", MAX_HEAD)
            answered = True
            status, headers, version = _parse_head(head)
            while 100 <= status < 200:  # interim replies (never asked for): skip to the real one
                status, headers, version = _parse_head(await reader.receive_until(b"\r\n\r\n", MAX_HEAD))
            reusable = version == "HTTP/1.1" and headers.get("connection", "").lower() != "close"
            if "chunked" in headers.get("transfer-encoding", "").lower():
                data = await _chunked(reader)
            elif "content-length" in headers:
                length = _int_header(headers["content-length"])
                if length > MAX_BODY:
                    raise BrokenReply(f"the reply is too large ({length} bytes)")
                data = await reader.receive_exactly(length)
            else:  # framed by the connection's end
                data, reusable = await _until_closed(reader), False
        except BaseException as exc:
            await anyio.aclose_forcefully(connection.stream)
            if isinstance(exc, _BROKEN):
                if not answered and not reader.buffer:
                    raise _ClosedWithoutAnswer from exc
                raise BrokenReply("the connection closed in the middle of the reply") from exc
            if isinstance(exc, anyio.DelimiterNotFound):
                raise BrokenReply("the reply's head is too long") from exc
            raise
        return status, data, reusable


_BROKEN = (anyio.IncompleteRead, anyio.BrokenResourceError, anyio.EndOfStream, OSError)


class _ClosedWithoutAnswer(Exception):
    """The connection ended before any byte of the reply."""


def _parse_head(head: bytes) -> tuple[int, dict[str, str], str]:
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not parts[1].isdigit():
        raise BrokenReply(f"not an HTTP reply: {lines[0][:40]!r}")
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return int(parts[1]), headers, parts[0]


def _int_header(value: str) -> int:
    if not value.isdigit():
        raise BrokenReply(f"a reply with the length {value[:20]!r}")
    return int(value)


async def _chunked(reader: BufferedByteReceiveStream) -> bytes:
    data = bytearray()
    while True:
        line = await reader.receive_until(b"\r\n", 1024)
        try:
            size = int(line.split(b";", 1)[0].strip(), 16)
        except ValueError as exc:
            raise BrokenReply(f"a chunk of the size {line[:20]!r}") from exc
        if size == 0:
            while await reader.receive_until(b"\r\n", MAX_HEAD):  # trailers, then an empty line
                pass
            return bytes(data)
        if len(data) + size > MAX_BODY:
            raise BrokenReply("the reply is too large")
        data += await reader.receive_exactly(size)
        await reader.receive_exactly(2)


async def _until_closed(reader: BufferedByteReceiveStream) -> bytes:
    data = bytearray()
    while True:
        try:
            data += await reader.receive()
        except anyio.EndOfStream:
            return bytes(data)
        if len(data) > MAX_BODY:
            raise BrokenReply("the reply is too large")


def _error_text(data: bytes) -> str:
    """Ollama's ``{"error": "..."}`` text, or the body itself."""
    try:
        reply = json.loads(data)
    except ValueError:
        return data.decode("utf-8", "replace")
    if isinstance(reply, dict) and isinstance(reply.get("error"), str):
        return str(reply["error"])
    return data.decode("utf-8", "replace")
