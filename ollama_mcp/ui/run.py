"""``ollama-mcp ui``: bind a loopback port, open the app (with its background work, as the MCP
server runs it), print the link with a fresh session token, and serve until Ctrl-C."""

from __future__ import annotations

import secrets
import socket
import sys
import webbrowser

import uvicorn

from ollama_mcp import listen
from ollama_mcp.app import open_app
from ollama_mcp.config import Settings
from ollama_mcp.ui.web import build_ui

HOST = "127.0.0.1"  # never another address: the view has one person's memory and no accounts


def bind(port: int) -> socket.socket:
    """A listening socket on 127.0.0.1:``port`` (0: any free port), or an error naming the fix."""
    return listen.bind(HOST, port)


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
