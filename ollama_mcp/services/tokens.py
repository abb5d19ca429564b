"""Bearer tokens of the HTTP server: making one, checking one, listing and revoking them.

A token is ``omcp_`` and 43 characters of ``secrets.token_urlsafe`` (256 random bits). It is shown
once, when created; the store keeps its sha256 only (``Storage.create_token``), in the local
principal's store, the one OLLAMA_MCP_DB names. Each token opens one principal's memory. No I/O
besides the store it is given.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

from ollama_mcp.config import LOCAL_PRINCIPAL, Settings, principal_name
from ollama_mcp.domain import AccessToken, utc_now
from ollama_mcp.errors import ConfigError, InvalidInputError
from ollama_mcp.storage.backends import open_backend

if TYPE_CHECKING:  # the storage seam imports numpy; the serve path imports this module before the app
    from ollama_mcp.storage.protocols import Storage, TokenStorage

PREFIX = "omcp_"
_SECRET = re.compile(r"omcp_[A-Za-z0-9_-]{43}")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


def hash_of(secret: str) -> str:
    """What the store keeps of a token: sha256, hex (a token's 256 random bits need no slow hash)."""
    return hashlib.sha256(secret.encode("ascii")).hexdigest()


def token_name(field: str, raw: str) -> str:
    name = raw.strip()
    if not _NAME.fullmatch(name):
        raise InvalidInputError(
            field,
            f"must be 1-64 letters, digits, dots, dashes or underscores, starting with a letter or digit; got {raw!r}",
            "name the token after who holds it, such as alice-laptop",
        )
    return name


async def create(store: TokenStorage, name: str, principal: str | None) -> tuple[AccessToken, str]:
    """A new token named ``name`` for ``principal`` (default: the principal of that name, when
    ``name`` is one): the record and the secret, which exists nowhere else afterwards."""
    name = token_name("NAME", name)
    try:
        owner = principal_name("--principal", principal if principal is not None else name)
    except ConfigError as exc:
        if principal is not None:
            raise
        raise InvalidInputError(
            "--principal", f"is needed: the token's name {name!r} is not a principal's name",
            "add --principal NAME (a lowercase letter, then lowercase letters, digits or underscores, such as alice)",
        ) from exc
    secret = PREFIX + secrets.token_urlsafe(32)
    token = AccessToken(name=name, principal=owner, created_at=utc_now())
    if not await store.create_token(token, hash_of(secret)):
        raise InvalidInputError(
            "NAME", f"is taken: an active token is named {name!r}",
            f"choose another name, or revoke that one first (ollama-mcp token revoke {name})",
        )
    return token, secret


def well_formed(secret: str) -> bool:
    """Whether ``secret`` has the shape of a token ``create`` makes."""
    return _SECRET.fullmatch(secret) is not None


async def verify(store: TokenStorage, secret: str) -> AccessToken | None:
    """The active token ``secret`` is, or None (malformed, unknown or revoked)."""
    if not well_formed(secret):
        return None  # not one of ours: no query
    return await store.token_by_hash(hash_of(secret))


async def revoke(store: TokenStorage, name: str) -> None:
    name = token_name("NAME", name)
    if not await store.revoke_token(name, utc_now()):
        raise InvalidInputError(
            "NAME", f"names no active token ({name!r})", "see the names with `ollama-mcp token list`"
        )


@asynccontextmanager
async def registry(settings: Settings) -> AsyncIterator[Storage]:
    """The local principal's store, which keeps every principal's tokens (just the store: no app)."""
    store, _ = await open_backend(settings.for_principal(LOCAL_PRINCIPAL))
    try:
        yield store
    finally:
        await store.aclose()


async def active(settings: Settings) -> int:
    """How many tokens are not revoked (the HTTP server requires tokens when there are any)."""
    async with registry(settings) as store:
        return sum(1 for token in await store.list_tokens() if token.revoked_at is None)
