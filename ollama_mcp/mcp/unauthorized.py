"""What a client without a valid token is told, on a server with tokens (``serve --http``).

Our tokens are plain bearer tokens, made by ``ollama-mcp token create``; there is no OAuth
authorization server. So the server publishes no OAuth metadata (the SDK's protected-resource
metadata would name this server as its authorization server, which it is not), and:

- ``/mcp`` without a valid token answers 401 saying which it was (no token, or one this server
  does not know) and how to get and send one, in the body and in ``WWW-Authenticate``. Claude Code
  shows the body of that 401 when the configured header is wrong (checked with its CLI, 2.1.332).
- Without any header, clients such as Claude Code try OAuth discovery and then dynamic client
  registration at ``/register``; those addresses answer 404 with an OAuth-style JSON error whose
  description says the same, and Claude Code shows that body ("Dynamic Client Registration
  rejected (HTTP 404): ...") instead of a bare "Not Found".

Header values are ASCII without quotes or backslashes (RFC 6750's error_description).
"""

from __future__ import annotations

from mcp.server.auth.middleware.bearer_auth import RequireAuthMiddleware
from starlette.applications import Starlette
from starlette.authentication import BaseUser
from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

HOW_TO_GET_ONE = (
    "The server's operator makes one per person with: ollama-mcp token create NAME. "
    "Then: ollama-mcp config --client NAME --url URL --token-env VAR --write puts it in your client's config."
)
SEND_ONE = "send the header Authorization: Bearer <token>. " + HOW_TO_GET_ONE
MISSING = "This ollama-mcp server needs a bearer token: " + SEND_ONE
NOT_OURS = (
    "This bearer token is not one of this ollama-mcp server's (mistyped, or revoked). Ask its operator for a new "
    "one (ollama-mcp token create NAME) and put it in your client's Authorization header."
)
NO_OAUTH = "This ollama-mcp server does not use OAuth; it needs a bearer token: " + SEND_ONE
# Where OAuth clients look for an authorization server, metadata or registration (RFC 8414,
# OpenID discovery, RFC 9728, RFC 7591, and the 2025-03-26 spec's default endpoints).
OAUTH_PATHS = ("/.well-known/{rest:path}", "/register", "/authorize", "/token")


class TokenRequired:
    """The MCP endpoint behind the SDK's bearer check (its AuthenticationMiddleware has already
    checked the token with ours, ``apps.TokenVerifier``): a request it did not admit gets our 401."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if _admitted(scope):
            await self.app(scope, receive, send)
            return
        sent = Headers(scope=scope).get("authorization", "")
        description = NOT_OURS if sent.lower().startswith("bearer ") and sent[7:].strip() else MISSING
        challenge = f'Bearer realm="ollama-mcp", error="invalid_token", error_description="{description}"'
        refused = JSONResponse({"error": "invalid_token", "error_description": description}, status_code=401,
                               headers={"www-authenticate": challenge})
        await refused(scope, receive, send)


def _admitted(scope: Scope) -> bool:
    user = scope.get("user")
    return isinstance(user, BaseUser) and user.is_authenticated


async def _no_oauth(_request: Request) -> JSONResponse:
    return JSONResponse({"error": "invalid_request", "error_description": NO_OAUTH}, status_code=404)


def require_our_tokens(app: Starlette, path: str) -> None:
    """Put ``TokenRequired`` where the SDK's 401 was at ``path``, and answer OAuth's addresses."""
    for route in app.router.routes:
        if isinstance(route, Route) and route.path == path:
            sdk = route.app
            if not isinstance(sdk, RequireAuthMiddleware):
                raise TypeError(f"the SDK's {path} route is {type(sdk).__name__}, not its RequireAuthMiddleware")
            route.app = TokenRequired(sdk.app)
            break
    else:
        raise LookupError(f"no {path} route in the SDK's app")
    app.router.routes.extend(Route(p, _no_oauth, methods=["GET", "POST"]) for p in OAUTH_PATHS)
