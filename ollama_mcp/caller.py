"""Who a request comes from, set once where requests enter (the MCP tools) and read below: the
client whose "current conversation" it uses, and the name its writes are audited under. Outside
a request (stdio's one client, the CLI, background work) it is the process itself. No I/O."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

PROCESS = "process"  # the one client of a stdio server, and every caller that is not a request
TOKEN = "token:"  # the key prefix of a client known by its token alone (no MCP session)

_client: ContextVar[str] = ContextVar("ollama_mcp_client", default=PROCESS)
_actor: ContextVar[str | None] = ContextVar("ollama_mcp_actor", default=None)


def client() -> str:
    """The key of the client whose current conversation this call uses."""
    return _client.get()


def served_anywhere() -> bool:
    """Whether the calling client may be served by any instance of the HTTP server (a token used
    without an MCP session), so that what it keeps between calls must live in the store."""
    return _client.get().startswith(TOKEN)


def actor() -> str | None:
    """Who acts, for the write audit: the token's name over HTTP; None for the local user."""
    return _actor.get()


@contextmanager
def acting(client_key: str, actor_name: str | None) -> Iterator[None]:
    """Calls inside come from ``client_key``, acting as ``actor_name``."""
    client_token, actor_token = _client.set(client_key), _actor.set(actor_name)
    try:
        yield
    finally:
        _client.reset(client_token)
        _actor.reset(actor_token)
