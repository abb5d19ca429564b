"""Serving MCP over streamable HTTP (``ollama-mcp serve --http``): when it may start, which Host
and Origin headers it accepts, and the SDK's app under uvicorn.

The rules, decided once at start:
- Tokens exist (``ollama-mcp token create``): every request needs one (401 otherwise, saying how
  to get one: ``unauthorized``); each acts for its token's principal.
- No tokens: only a loopback address may be bound, and every request acts for the settings'
  principal (``local`` unless OLLAMA_MCP_PRINCIPAL says otherwise), as the stdio server does.
  Binding another address without tokens is refused with the fix.
- Host and Origin must name this server (DNS rebinding protection, 421/403 otherwise); bodies
  are capped at ``MAX_BODY_BYTES`` (413); an MCP session idle for ``IDLE_SESSION_S`` is closed.
"""

from __future__ import annotations

import hmac
import ipaddress
import secrets
import socket
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.routing import Mount

from ollama_mcp.config import Settings
from ollama_mcp.errors import ConfigError
from ollama_mcp.mcp.server import build_server
from ollama_mcp.mcp.unauthorized import require_our_tokens
from ollama_mcp.services import tokens

if TYPE_CHECKING:
    from ollama_mcp.app import App

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765
PATH = "/mcp"
VIEW_PATH = "/ui"  # the browser view (ollama_mcp.ui), behind the same tokens
REST_PATH = "/api/v1"  # the REST API (ollama_mcp.rest), behind the same tokens
MAX_BODY_BYTES = 4 * 2**20  # a memory is at most OLLAMA_MCP_MAX_CONTENT_CHARS (100k) characters
IDLE_SESSION_S = 30 * 60.0


@dataclass(frozen=True)
class Plan:
    """How the server will serve: where clients reach it, and whether tokens are required."""

    url: str  # the MCP endpoint clients connect to
    tokens: int  # active tokens (0: none required, loopback only)
    allowed_hosts: tuple[str, ...]
    allowed_origins: tuple[str, ...]


def is_loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def plan(host: str, port: int, public_url: str | None, tokens: int, extra_origins: tuple[str, ...] = ()) -> Plan:
    """The serving plan for a socket bound to ``host``:``port``, or a ConfigError with the fix.
    Browser requests are accepted from this server's own origin (scheme, host and port) and
    ``extra_origins`` (OLLAMA_MCP_ALLOWED_ORIGINS) only: a page on another local port is another
    program."""
    loopback = is_loopback(host)
    if not loopback and tokens == 0:
        raise ConfigError(
            f"Refusing to serve on {host}, which other machines can reach, without tokens: anyone there could read "
            "and change every memory. Create one for each person or client with `ollama-mcp token create NAME` "
            "and start again, or serve on 127.0.0.1 (the default --host)."
        )
    if public_url is None:
        if host in ("0.0.0.0", "::", ""):
            raise ConfigError(
                f"--host {host} listens on every address; add --public-url with the URL clients use to reach "
                "this server (such as https://memory.example.com/mcp), so its Host and Origin can be checked."
            )
        shown = f"[{host}]" if ":" in host else host
        public_url = f"http://{shown}:{port}{PATH}"
    parts = urlsplit(public_url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"--public-url must be an http:// or https:// URL, such as https://memory.example.com/mcp; "
                          f"got {public_url!r}.")
    hosts = {parts.netloc}
    origins = {f"{parts.scheme}://{parts.netloc}"}
    if loopback:
        hosts |= {"127.0.0.1:*", "localhost:*", "[::1]:*"}
        origins |= {f"http://{name}:{port}" for name in ("127.0.0.1", "localhost", "[::1]")}
    elif host not in ("0.0.0.0", "::", ""):  # clients may also name the address itself
        shown = f"[{host}]" if ":" in host else host
        hosts.add(f"{shown}:{port}")
    origins |= set(extra_origins)
    return Plan(public_url, tokens, tuple(sorted(hosts)), tuple(sorted(origins)))


async def serve(settings: Settings, sock: socket.socket, public_url: str | None, stateless: bool) -> None:
    """Serve MCP over streamable HTTP on ``sock`` until cancelled (Ctrl-C)."""
    import uvicorn  # noqa: PLC0415 - the web server only for this command

    host, port = sock.getsockname()[:2]
    served = plan(host, port, public_url, await tokens.active(settings), settings.allowed_origins)
    view_token = secrets.token_urlsafe(32)
    app = http_app(settings, served, stateless=stateless, view_token=view_token)
    auth = f"a token required ({served.tokens} active)" if served.tokens else "no tokens, acting for the local user"
    view = view_url(served) + ("" if served.tokens else f"?token={view_token}")
    print(f"ollama-mcp serves MCP at {served.url} ({auth}); database {settings.database}.\n"
          f"The memory view is at {view}" + (" (sign in with your token)" if served.tokens else
                                              " (the link carries this run's token)")
          + ". Stop with Ctrl-C.", file=sys.stderr, flush=True)
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on", timeout_graceful_shutdown=5)
    await uvicorn.Server(config).serve(sockets=[sock])


def view_url(served: Plan) -> str:
    """Where the browser view is: ``VIEW_PATH`` beside the MCP endpoint."""
    return served.url.removesuffix(PATH) + VIEW_PATH + "/"


def http_app(settings: Settings, served: Plan, *, stateless: bool = False, view_token: str | None = None) -> Starlette:
    """The ASGI app: the MCP server's tools at ``PATH`` and the browser view at ``VIEW_PATH``,
    with the plan's checks. With tokens, a person signs in to the view with their MCP token and
    sees their principal's memory only; without, ``view_token`` opens it (as ``ollama-mcp ui``'s
    link does), and no view_token: a random one nobody knows."""
    from ollama_mcp.rest.api import rest_app  # noqa: PLC0415 - off the handshake path
    from ollama_mcp.ui.guard import Site, shared_site  # noqa: PLC0415 - jinja2 after the handshake path
    from ollama_mcp.ui.web import shared_ui  # noqa: PLC0415

    server = build_server(settings, public_url=served.url if served.tokens else None)
    security = TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=list(served.allowed_hosts), allowed_origins=list(served.allowed_origins),
    )
    app = server.streamable_http_app(
        streamable_http_path=PATH, stateless_http=stateless,
        transport_security=security, max_request_body_size=MAX_BODY_BYTES, session_idle_timeout=IDLE_SESSION_S,
    )
    apps = server.apps
    if served.tokens:
        require_our_tokens(app, PATH)

        async def admit(secret: str) -> tuple[App, str | None] | None:
            token = await apps.token(secret)
            return None if token is None else (await apps.of(token.principal), token.name)

        site = shared_site(served.allowed_hosts, served.allowed_origins, served.url)
    else:
        expected = view_token or secrets.token_urlsafe(32)

        async def admit(secret: str) -> tuple[App, str | None] | None:
            return (await apps.own(), None) if hmac.compare_digest(secret, expected) else None

        site = Site(served.allowed_hosts, served.allowed_origins, shared=False)
    app.router.routes.append(Mount(VIEW_PATH, app=shared_ui(admit, site)))

    async def admit_rest(secret: str | None) -> tuple[App, str | None] | None:
        """A token opens its principal's memory; without tokens (loopback only) every request is
        the local user's, as on the MCP endpoint."""
        if not served.tokens:
            return await apps.own(), None
        token = None if secret is None else await apps.token(secret)
        return None if token is None else (await apps.of(token.principal), token.name)

    rest = rest_app(admit_rest, served.allowed_hosts, served.allowed_origins, bool(served.tokens))
    app.router.routes.append(Mount(REST_PATH, app=rest))
    return app
