"""``ollama-mcp ui``: bind a loopback port, open the app (with its background work, as the MCP
server runs it), print the link with a fresh session token, and serve until Ctrl-C."""

from __future__ import annotations

import errno
import secrets
import socket
import sys
import webbrowser

import uvicorn

from ollama_mcp.app import open_app
from ollama_mcp.config import Settings
from ollama_mcp.errors import InvalidInputError
from ollama_mcp.ui.web import build_ui

HOST = "127.0.0.1"  # never another address: the view has one person's memory and no accounts


def bind(port: int) -> socket.socket:
    """A listening socket on 127.0.0.1:``port`` (0: any free port), or an error naming the fix."""
    if not 0 <= port <= 65535:
        raise InvalidInputError("--port", f"is {port}", "pass a port from 1 to 65535, or --port 0 for any free one")
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        # Accepted connections inherit it: uvicorn writes a response's head and body apart, and
        # Nagle's algorithm held the body for the client's delayed ACK, 40 ms on every page.
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.bind((HOST, port))
        sock.listen(64)
    except OSError as exc:
        sock.close()
        why = "is in use" if exc.errno == errno.EADDRINUSE else f"cannot be used ({exc.strerror})"
        raise InvalidInputError("--port", f"{port} {why} on {HOST}", "pass another one, or --port 0 for any free one") from None
    return sock


async def serve(settings: Settings, sock: socket.socket, open_browser: bool) -> None:
    token = secrets.token_urlsafe(32)
    url = f"http://{HOST}:{sock.getsockname()[1]}/?token={token}"
    async with open_app(settings) as memory:
        # Uvicorn's access log would write every search query (memory text) to the terminal.
        config = uvicorn.Config(build_ui(memory, token), lifespan="off", access_log=False, log_level="warning",
                                server_header=False, timeout_keep_alive=5)
        print(f"The memory view of {settings.database} is at\n  {url}\n(the link carries this session's token; "
              "Ctrl-C stops it)", flush=True)
        if open_browser:
            webbrowser.open(url)
        await uvicorn.Server(config).serve(sockets=[sock])
    print("stopped", file=sys.stderr)
