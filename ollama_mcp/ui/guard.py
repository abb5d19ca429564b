"""What keeps the browser view to the people it belongs to: who a request is for, the Host and
Origin checks, the CSRF token of every form, the size cap on uploads and the response headers.

Every request passes through ``Guard`` (plain ASGI, in front of every route). It serves two sites:

- ``ollama-mcp ui`` (``LOCAL``): one person, one app, a random session token in the link it
  prints (``/?token=...``).
- The shared HTTP server's ``/ui`` (``shared_site``): each person signs in with their MCP token
  (a form, so the token never sits in an address or a proxy's log); the token opens its
  principal's app only, checked again at every request, so revoking it ends the session.

In both:
- ``Host`` must name this server, so a DNS-rebinding page (evil.example resolving to 127.0.0.1)
  is refused before anything is read.
- The secret that was accepted is kept in a cookie (HttpOnly, SameSite=Strict, Secure behind
  https); without it (or with one no longer valid): 403, nothing read.
- A write (any method but GET/HEAD) must carry an ``Origin`` of this very server; each form also
  carries a CSRF token derived from the secret, checked by ``checked_form``.
- No page may be framed or cached, nor its address sent as a referrer to another site.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from html import escape
from http.cookies import SimpleCookie
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, urlencode, urlsplit

from starlette.datastructures import FormData
from starlette.requests import Request

from ollama_mcp.errors import OllamaMcpError
from ollama_mcp.listen import names_this_server

if TYPE_CHECKING:
    from ollama_mcp.app import App

COOKIE = "ollama_mcp_ui"
VISITOR = "ollama_mcp.visitor"  # the scope key the routes read the request's Visitor from
SIGN_IN = "/sign-in"
MAX_BODY_BYTES = 64 * 2**20  # an import file of ~100k memories; anything larger is refused with 413
MAX_SIGN_IN_BYTES = 4096
HEADERS = [
    (b"content-security-policy",
     b"default-src 'none'; style-src 'self'; img-src 'self' data:; form-action 'self'; frame-ancestors 'none';"
     b" base-uri 'none'"),
    (b"x-frame-options", b"DENY"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"same-origin"),  # no-referrer would make Chromium send "Origin: null" on forms
    (b"cache-control", b"no-store"),
]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


@dataclass(frozen=True)
class Visitor:
    """Whom a request is for: the app (one principal's memory) it opens, the name its writes are
    audited under (the token's; None for the local user) and its forms' CSRF token."""

    app: App
    actor: str | None
    csrf: str


Admit = Callable[[str], Awaitable[tuple["App", str | None] | None]]
"""A presented secret -> the app it opens and the actor it acts as, or None (not valid)."""


@dataclass(frozen=True)
class Site:
    """Where the view is served: the Host and Origin headers it accepts (``name:*`` is any port;
    origins None: this very server over http) and how a person gets in."""

    hosts: tuple[str, ...]
    origins: tuple[str, ...] | None
    shared: bool  # sign in with an MCP token (the shared server) or the printed link (`ui`)
    secure: bool = False  # served behind https: the cookie is Secure


LOCAL = Site(hosts=("127.0.0.1:*", "localhost:*", "[::1]:*"), origins=None, shared=False)


def shared_site(hosts: tuple[str, ...], origins: tuple[str, ...], public_url: str) -> Site:
    return Site(hosts, origins, shared=True, secure=public_url.startswith("https://"))


def csrf_token(secret: str) -> str:
    """The token every form carries: derived from the session's secret, so nothing more is stored."""
    return hmac.new(secret.encode(), b"csrf", hashlib.sha256).hexdigest()


def visitor(request: Request) -> Visitor:
    """The request's visitor, as the guard admitted it."""
    found: Visitor = request.scope[VISITOR]
    return found


async def checked_form(request: Request) -> FormData:
    """The request's form once its CSRF token matches; a write without it changes nothing."""
    form = await request.form(max_files=1, max_fields=50)
    given = form.get("csrf")
    if not isinstance(given, str) or not hmac.compare_digest(given, visitor(request).csrf):
        raise Refused(403, "This form is out of date or came from another site; reload the page and try again.")
    return form


class Refused(Exception):
    """A request the guard (or a form check) turns away, with the status and the sentence to show."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class Guard:
    """The ASGI middleware in front of every route (see the module docstring)."""

    def __init__(self, app: ASGIApp, admit: Admit, site: Site) -> None:
        self.app = app
        self.admit = admit
        self.site = site

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        root = scope.get("root_path", "")
        path = _route_path(scope)
        try:
            host = self._checked_host(headers.get("host", ""))
            if path.startswith("/static/"):
                await self.app(scope, receive, _with_headers(send))
                return
            query = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1")))
            given = query.pop("token", None)
            if given is not None and not self.site.shared and await self._admitted(given) is not None:
                await _enter(send, given, root + path + (f"?{urlencode(query)}" if query else ""), self._cookie(root))
                return
            if self.site.shared and path == SIGN_IN and scope["method"] == "POST":
                self._check_origin(headers, host)
                await self._sign_in(receive, send, root)
                return
            secret = _cookie_value(headers.get("cookie", ""))
            admitted = None if secret is None else await self._admitted(secret)
            if secret is None or admitted is None:
                raise Refused(403, "Sign in with your token (`ollama-mcp token create` printed it) to see your memory."
                              if self.site.shared else
                              "This page needs the link that `ollama-mcp ui` printed (it carries a token).")
            if scope["method"] not in ("GET", "HEAD"):
                self._check_origin(headers, host)
                length = headers.get("content-length")
                if length is not None and length.isdigit() and int(length) > MAX_BODY_BYTES:
                    raise _too_large()
        except Refused as refused:
            await self._refuse(send, refused, root)
            return
        scope[VISITOR] = Visitor(admitted[0], admitted[1], csrf_token(secret))
        await self.app(scope, _capped(receive), _with_headers(send))

    async def _admitted(self, secret: str) -> tuple[App, str | None] | None:
        try:
            return await self.admit(secret)
        except OllamaMcpError as exc:
            raise Refused(503, f"The memory store cannot be reached right now: {exc}") from exc

    def _checked_host(self, host: str) -> str:
        if not names_this_server(host.lower(), self.site.hosts):
            raise Refused(403, "This server answers only to the names it serves (DNS rebinding protection)."
                          if self.site.shared else
                          "This server answers only to 127.0.0.1 or localhost (DNS rebinding protection).")
        return host

    def _check_origin(self, headers: dict[str, str], host: str) -> None:
        origin = headers.get("origin")
        if self.site.origins is None:
            allowed = origin is not None and urlsplit(origin).netloc == host and urlsplit(origin).scheme == "http"
        else:
            allowed = origin is not None and names_this_server(origin.lower(), self.site.origins)
        if not allowed:
            raise Refused(403, "A change must come from this page itself; cross-site requests are refused.")

    def _cookie(self, root: str) -> str:
        return f"HttpOnly; SameSite=Strict; Path={root or '/'}" + ("; Secure" if self.site.secure else "")

    async def _sign_in(self, receive: Receive, send: Send, root: str) -> None:
        """The sign-in form's POST: a valid token gets the cookie and the conversations page."""
        body = b""
        more = True
        while more:
            message = await receive()
            body += message.get("body", b"")
            more = message.get("more_body", False)
            if len(body) > MAX_SIGN_IN_BYTES:
                raise Refused(413, "That is not a token: it is far too long.")
        given = dict(parse_qsl(body.decode("latin-1"))).get("token", "").strip()
        if not given or await self._admitted(given) is None:
            raise Refused(403, "That token is not valid: it is mistyped, unknown or revoked. "
                          "Ask whoever runs the server for a new one (`ollama-mcp token create`).")
        await _enter(send, given, f"{root}/", self._cookie(root))

    async def _refuse(self, send: Send, refused: Refused, root: str) -> None:
        if self.site.shared and refused.status in (403, 503):
            await _html(send, refused.status, _sign_in_page(root, refused.message))
        else:
            await _plain(send, refused.status, refused.message)


def _route_path(scope: Scope) -> str:
    """The request's path below where the view is mounted (``/ui`` on the shared server)."""
    path: str = scope["path"]
    root: str = scope.get("root_path", "")
    return path[len(root):] or "/" if root and path.startswith(root) else path


def _cookie_value(header: str) -> str | None:
    cookie = SimpleCookie()
    try:
        cookie.load(header)
    except Exception:  # a malformed Cookie header is no session
        return None
    morsel = cookie.get(COOKIE)
    return None if morsel is None or not morsel.value else morsel.value


async def _enter(send: Send, secret: str, location: str, attributes: str) -> None:
    """Set the session cookie and send the browser on (without the secret in its address)."""
    await send({"type": "http.response.start", "status": 303, "headers": [
        (b"location", location.encode()), (b"set-cookie", f"{COOKIE}={secret}; {attributes}".encode()), *HEADERS,
    ]})
    await send({"type": "http.response.body", "body": b""})


def _sign_in_page(root: str, message: str) -> str:
    return (
        '<!doctype html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f'<title>Sign in · ollama-mcp</title>\n<link rel="stylesheet" href="{escape(root)}/static/ui.css">\n</head>\n'
        f'<body>\n<header><strong>ollama-mcp</strong></header>\n<main>\n<h1>Sign in</h1>\n'
        f'<p class="error" role="alert">{escape(message)}</p>\n'
        f'<form method="post" action="{escape(root)}{SIGN_IN}">\n'
        '  <label>Your token <input type="password" name="token" autocomplete="current-password" required></label>\n'
        '  <button type="submit">Sign in</button>\n</form>\n'
        "<p>The token opens your memory only; the session ends when it is revoked.</p>\n</main>\n</body>\n</html>\n"
    )


def _capped(receive: Receive) -> Receive:
    """``receive`` that stops a body (without Content-Length) past MAX_BODY_BYTES."""
    seen = 0

    async def capped() -> Message:
        nonlocal seen
        message = await receive()
        if message["type"] == "http.request":
            seen += len(message.get("body", b""))
            if seen > MAX_BODY_BYTES:
                raise _too_large()  # reaches the app's handler for Refused
        return message

    return capped


def _too_large() -> Refused:
    return Refused(413, f"The upload is larger than {MAX_BODY_BYTES // 2**20} MiB; split the export file.")


def _with_headers(send: Send) -> Send:
    async def sending(message: Message) -> None:
        if message["type"] == "http.response.start":
            message["headers"] = [*message.get("headers", []), *HEADERS]
        await send(message)

    return sending


async def _plain(send: Send, status: int, text: str) -> None:
    await _respond(send, status, b"text/plain; charset=utf-8", text)


async def _html(send: Send, status: int, html: str) -> None:
    await _respond(send, status, b"text/html; charset=utf-8", html)


async def _respond(send: Send, status: int, kind: bytes, text: str) -> None:
    await send({"type": "http.response.start", "status": status, "headers": [(b"content-type", kind), *HEADERS]})
    await send({"type": "http.response.body", "body": text.encode()})
