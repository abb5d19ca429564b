"""The SQLite backend's own parts behind an app's seams (its in-memory ranker, its store), for
the tests that look at them: each checks the app is SQLite's, so a test run on PostgreSQL by
mistake says so instead of failing on a missing attribute."""

from __future__ import annotations

from ollama_mcp.app import App
from ollama_mcp.storage.sqlite.search import HybridSearch
from ollama_mcp.storage.sqlite.store import Store


def sqlite_ranker(app: App) -> HybridSearch:
    assert isinstance(app.ranker, HybridSearch), "a test of the SQLite ranker ran on another backend"
    return app.ranker


def sqlite_store(app: App) -> Store:
    assert isinstance(app.store, Store), "a test of the SQLite store ran on another backend"
    return app.store
