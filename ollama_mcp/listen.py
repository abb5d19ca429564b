"""The listening socket of the HTTP servers (``serve --http`` and ``ui``), bound before the app is
opened so that a port in use is reported at once, with the fix; and which Host and Origin
headers name such a server (``names_this_server``), for each web edge's checks."""

from __future__ import annotations

import errno
import socket

from ollama_mcp.errors import InvalidInputError


def names_this_server(value: str, patterns: tuple[str, ...]) -> bool:
    """``value`` (a Host or Origin header) is one of ``patterns``, where ``name:*`` is that name
    with any port (or none)."""
    for pattern in patterns:
        if pattern.endswith(":*"):
            base = pattern[:-2]
            if value == base or value.startswith(base + ":"):
                return True
        elif value == pattern:
            return True
    return False


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on ``host``:``port`` (0: any free port), or an error naming the fix."""
    if not 0 <= port <= 65535:
        raise InvalidInputError("--port", f"is {port}", "pass a port from 1 to 65535, or --port 0 for any free one")
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
    except OSError as exc:
        raise InvalidInputError("--host", f"{host!r} is not an address of this machine ({exc.strerror})",
                                "pass an address such as 127.0.0.1") from None
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        # Accepted connections inherit it: uvicorn writes a response's head and body apart, and
        # Nagle's algorithm held the body for the client's delayed ACK, 40 ms on every page.
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.bind(address)
        sock.listen(128)
    except OSError as exc:
        sock.close()
        why = "is in use" if exc.errno == errno.EADDRINUSE else f"cannot be used ({exc.strerror})"
        raise InvalidInputError(
            "--port", f"{port} {why} on {host}", "pass another one, or --port 0 for any free one"
        ) from None
    return sock
