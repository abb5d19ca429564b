"""The browser view in process, its CSRF token, and a principal's store read directly."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx

from ollama_mcp.app import App
from ollama_mcp.config import Settings
from ollama_mcp.ui.web import build_ui
from tests.conftest import Database

BASE = "http://127.0.0.1:8766"


@asynccontextmanager
async def view(app: App, *, enter: bool = True) -> AsyncIterator[httpx.AsyncClient]:
    """An HTTP client of the view over ``app``; with ``enter``, it has followed the printed link."""
    web = build_ui(app, TOKEN)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=web), base_url=BASE) as client:
        if enter:
            entered = await client.get(f"/?token={TOKEN}")
            assert entered.status_code == 303 and entered.headers["location"] == "/"
            assert "HttpOnly" in entered.headers["set-cookie"] and "SameSite=Strict" in entered.headers["set-cookie"]
        yield client


def csrf_of(page: httpx.Response) -> str:
    found = re.search(r'name="csrf" value="([0-9a-f]+)"', page.text)
    assert found, page.text
    return found.group(1)


def store_of(settings: Settings, backend: str, principal: str) -> Database:
    mine = settings.for_principal(principal)
    return Database(backend, str(mine.store_path) if backend == "sqlite" else mine.store_url)


TOKEN = "session-token-for-tests-0123456789abcdefghij"
