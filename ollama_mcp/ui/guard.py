"""What keeps the browser view to the person who started it: the session token, the Host and
Origin checks, the CSRF token of every form, the size cap on uploads and the response headers.

Every request passes through ``Guard`` (plain ASGI, in front of every route):

- ``Host`` must be a loopback name, so a DNS-rebinding page (evil.example resolving to
  127.0.0.1) is refused before anything is read.
- The session token arrives once, in the link ``ollama-mcp ui`` prints (``/?token=...``); the
  guard answers with a cookie (HttpOnly, SameSite=Strict) and a redirect that drops the token
  from the address bar and the history. Without the cookie or the token: 403, nothing read.
- A write (any method but GET/HEAD) must carry an ``Origin`` of this very server; each form also
  carries a CSRF token derived from the session token, checked by ``checked_form``.
- No page may be framed or cached, nor its address sent as a referrer to another site.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Awaitable, Callable, MutableMapping
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

from starlette.datastructures import FormData
from starlette.requests import Request

COOKIE = "ollama_mcp_ui"
LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost", "[::1]"})
MAX_BODY_BYTES = 64 * 2**20  # an import file of ~100k memories; anything larger is refused with 413
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


def csrf_token(session_token: str) -> str:
    """The token every form carries: derived from the session's, so nothing more is stored."""
    return hmac.new(session_token.encode(), b"csrf", hashlib.sha256).hexdigest()


async def checked_form(request: Request) -> FormData:
    """The request's form once its CSRF token matches; a write without it changes nothing."""
    form = await request.form(max_files=1, max_fields=50)
    given = form.get("csrf")
    if not isinstance(given, str) or not hmac.compare_digest(given, request.app.state.csrf):
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

    def __init__(self, app: ASGIApp, session_token: str) -> None:
        self.app = app
        self.token = session_token

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        try:
            host = self._checked_host(headers.get("host", ""))
            query = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1")))
            given = query.get("token")
            if given is not None and hmac.compare_digest(given, self.token):
                await self._enter(scope, query, send)
                return
            if not scope["path"].startswith("/static/") and not self._has_cookie(headers.get("cookie", "")):
                raise Refused(403, "This page needs the link that `ollama-mcp ui` printed (it carries a token).")
            if scope["method"] not in ("GET", "HEAD"):
                self._check_write(headers, host)
        except Refused as refused:
            await _plain(send, refused.status, refused.message)
            return
        await self.app(scope, _capped(receive), _with_headers(send))

    def _checked_host(self, host: str) -> str:
        name = host.rsplit(":", 1)[0] if not host.endswith("]") else host
        if name.lower() not in LOOPBACK_NAMES:
            raise Refused(403, "This server answers only to 127.0.0.1 or localhost (DNS rebinding protection).")
        return host

    def _has_cookie(self, header: str) -> bool:
        cookie = SimpleCookie()
        try:
            cookie.load(header)
        except Exception:  # a malformed Cookie header is no session
            return False
        morsel = cookie.get(COOKIE)
        return morsel is not None and hmac.compare_digest(morsel.value, self.token)

    def _check_write(self, headers: dict[str, str], host: str) -> None:
        origin = headers.get("origin")
        if origin is None or urlsplit(origin).netloc != host or urlsplit(origin).scheme != "http":
            raise Refused(403, "A change must come from this page itself; cross-site requests are refused.")
        length = headers.get("content-length")
        if length is not None and length.isdigit() and int(length) > MAX_BODY_BYTES:
            raise _too_large()

    async def _enter(self, scope: Scope, query: dict[str, str], send: Send) -> None:
        """The printed link: set the session cookie and send the browser on without the token."""
        del query["token"]
        location = scope["path"] + (f"?{urlencode(query)}" if query else "")
        cookie = f"{COOKIE}={self.token}; HttpOnly; SameSite=Strict; Path=/"
        await send({"type": "http.response.start", "status": 303, "headers": [
            (b"location", location.encode()), (b"set-cookie", cookie.encode()), *HEADERS,
        ]})
        await send({"type": "http.response.body", "body": b""})


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
    await send({"type": "http.response.start", "status": status, "headers": [
        (b"content-type", b"text/plain; charset=utf-8"), *HEADERS,
    ]})
    await send({"type": "http.response.body", "body": text.encode()})
