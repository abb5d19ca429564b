"""The pages of the browser view: one handler per route, each reading through the app's store and
writing only through the same service and lifecycle methods as the MCP tools (one path for every
caller; writes are audited through the door "ui"). Errors of the product are translated here,
once, into a page with the sentence and a status."""

from __future__ import annotations

import hmac
import re
import tempfile
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any
from urllib.parse import quote

import anyio
from jinja2 import Environment, PackageLoader
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from ollama_mcp import audit, caller
from ollama_mcp.app import App
from ollama_mcp.domain import ConversationQuery
from ollama_mcp.errors import ConversationClosedError, InvalidInputError, NotFoundError, OllamaError, OllamaMcpError
from ollama_mcp.inputs import fields
from ollama_mcp.inputs.conversations import conversation_query
from ollama_mcp.inputs.memories import note_change
from ollama_mcp.inputs.search import search_request
from ollama_mcp.services import doctor
from ollama_mcp.services.archive import cut_notice
from ollama_mcp.services.imports.formats import EXPECTED, FORMAT_NAMES
from ollama_mcp.services.imports.sources import open_source
from ollama_mcp.ui import views
from ollama_mcp.ui.guard import LOCAL, Admit, Guard, Refused, Site, checked_form, visitor

NOTES_SHOWN = 200  # notes per page of a conversation, newest first
MESSAGES_SHOWN = 200  # the end of a transcript; the export has all of it
LISTED = 500  # conversations a page of the list shows (fields.MAX_LIST_LIMIT); the rest on the next pages
SHOWN_CHARS = 3_000  # of a memory's text shown on its conversation's page before "show all"
DONE = {
    "updated": "Saved as a new version; the old one is kept below it as history.",
    "unchanged": "Nothing was changed.",
    "memory-deleted": "The memory was deleted.",
    "ended": "The conversation was ended; it stays searchable.",
    "conversation-deleted": "The conversation was deleted with everything in it.",
    "undone": "Undone: the older statement holds again, and is not superseded by that one any more.",
    "confirmed": "Confirmed: the change is off the review list.",
}
CHANGES_SHOWN = 50  # of each list on the changed-facts page


def build_ui(memory: App, session_token: str) -> Guard:
    """``ollama-mcp ui``: the view of one opened app, for whoever holds ``session_token``."""

    async def admit(secret: str) -> tuple[App, str | None] | None:
        return (memory, None) if hmac.compare_digest(secret, session_token) else None

    return Guard(_pages(), admit, LOCAL)


def shared_ui(admit: Admit, site: Site) -> Guard:
    """The view the shared HTTP server mounts at ``/ui``: each visitor sees the app their secret
    opens (``admit``: an MCP token -> its principal's app), nothing else."""
    return Guard(_pages(), admit, site)


def _pages() -> Starlette:
    routes = [
        Route("/", conversations),
        Route("/conversations/{conversation_id}", conversation),
        Route("/conversations/{conversation_id}/end", end_conversation, methods=["POST"]),
        Route("/conversations/{conversation_id}/delete", delete_conversation, methods=["GET", "POST"]),
        Route("/conversations/{conversation_id}/export", export_conversation),
        Route("/memories/{memory_id}/update", update_memory, methods=["POST"]),
        Route("/memories/{memory_id}/delete", delete_memory, methods=["GET", "POST"]),
        Route("/search", search),
        Route("/changes", changes),
        Route("/changes/review", review_change, methods=["POST"]),
        Route("/import", import_file, methods=["GET", "POST"]),
        Route("/export", export_all),
        Route("/health", health),
        Mount("/static", StaticFiles(directory=Path(__file__).parent / "static"), name="static"),
    ]
    web = Starlette(routes=routes, exception_handlers={OllamaMcpError: _product_error, Refused: _refused})
    web.state.templates = Environment(loader=PackageLoader("ollama_mcp.ui", "templates"), autoescape=True)
    return web


# -- reading --------------------------------------------------------------------------------------


async def conversations(request: Request) -> Response:
    """The conversations, latest activity first, ``LISTED`` to a page."""
    params = request.query_params
    status, text = params.get("status") or None, params.get("q") or None
    number = _page_number(params.get("page", "1"))
    query = conversation_query(status, LISTED, text, None, "activity")
    found = await _app(request).conversations.listed(
        replace(query, limit=LISTED + 1, offset=(number - 1) * LISTED)  # one more: is there a next page?
    )
    return _page(request, "conversations.html", conversations=found[:LISTED], status=status or "", q=text or "",
                 page=number, more=len(found) > LISTED, first=(number - 1) * LISTED + 1)


async def conversation(request: Request) -> Response:
    app = _app(request)
    conversation_id = _conversation_id(request)
    current, rows, _ = await app.conversations.snapshot(conversation_id)
    # Its title as listings give it (the same opening, read by the same query).
    listed = await app.conversations.listed(ConversationQuery(ids=(current.id,), limit=1))
    current = replace(current, opening=listed[0].opening if listed else None)
    parts = views.conversation_parts(rows)
    pages = max(1, -(-len(parts.notes) // NOTES_SHOWN))
    number = _page_number(request.query_params.get("page", "1"), pages)
    shown = parts.notes[(number - 1) * NOTES_SHOWN:number * NOTES_SHOWN]
    notes = [replace(n, pending=await app.indexer.is_pending(n.memory)) for n in shown]
    transcript = parts.transcript[-MESSAGES_SHOWN:]
    return _page(request, "conversation.html", conversation=current, parts=parts, notes=notes, page=number,
                 shown_chars=SHOWN_CHARS,
                 pages=pages, first=(number - 1) * NOTES_SHOWN + 1, transcript=transcript,
                 earlier=len(parts.transcript) - len(transcript))


async def search(request: Request) -> Response:
    app = _app(request)
    params = request.query_params
    query = params.get("q", "").strip()
    scope = params.get("conversation") or None
    form: dict[str, Any] = {key: params.get(key, "") for key in ("q", "conversation", "tags", "since", "until", "kind")}
    form |= {"superseded": bool(params.get("superseded"))}
    choices = await app.conversations.listed(conversation_query(None, LISTED))
    outcome = matches = None
    names: dict[str, str] = {c.id: c.title or "unnamed" for c in choices}
    if query:
        tags = [t.strip() for t in form["tags"].split(",") if t.strip()] or None
        until = form["until"] or None
        if until is not None and len(until) == 10:  # the date picker's day is included, to its end
            until += "T23:59:59.999999"
        asked = search_request(
            query, scope, 20, None, tags, form["since"] or None, until,
            form["kind"] or None, form["superseded"], everywhere=scope is None,
        )
        outcome = await app.recall.search(asked)
        matches = views.matches(query, outcome.hits)
    return _page(request, "search.html", form=form, outcome=outcome, matches=matches, choices=choices, names=names)


async def changes(request: Request) -> Response:
    """Changed facts: the supersessions to review (conflicts, unsure ones) and the recent ones."""
    to_review, recent = await _app(request).superseding.listed(CHANGES_SHOWN)
    return _page(request, "changes.html", to_review=to_review, recent=recent)


async def health(request: Request) -> Response:
    app = _app(request)
    checks = await doctor.run_checks(app.settings)
    lines = await anyio.to_thread.run_sync(doctor.stats, app.settings)
    names = {c.id: c.title or "unnamed" for c in await app.conversations.listed(conversation_query(None, LISTED))}
    plot = views.timeline_plot(await app.memories.timeline(), names)
    return _page(request, "health.html", checks=checks, lines=lines, plot=plot)


async def export_conversation(request: Request) -> Response:
    return await _export(request, _conversation_id(request))


async def export_all(request: Request) -> Response:
    return await _export(request, None)


async def _export(request: Request, conversation_id: str | None) -> Response:
    fmt = request.query_params.get("format", "json")
    if fmt not in ("json", "markdown"):
        raise InvalidInputError("format", f"is {fmt!r}", "choose json or markdown")
    text, _ = await _app(request).archive.export_text(conversation_id, fmt)
    name = f"conversation-{conversation_id}" if conversation_id else "memory-export"
    suffix, kind = (".json", "application/json") if fmt == "json" else (".md", "text/markdown")
    return Response(text, media_type=f"{kind}; charset=utf-8",
                    headers={"content-disposition": f'attachment; filename="{name}{suffix}"'})


# -- writing (each through the service, as the tools do) -----------------------------------------


async def update_memory(request: Request) -> Response:
    app = _app(request)
    form = await checked_form(request)
    memory_id = fields.memory_id("memory_id", request.path_params["memory_id"])
    old = await app.memories.get(memory_id)
    content = _field(form.get("content"))
    tags = [t.strip() for t in _field(form.get("tags")).split(",") if t.strip()]
    if content.strip() == old.content and tuple(tags) == old.tags:
        return _redirect(request, f"/conversations/{old.conversation_id}", "unchanged")
    with _writing(request):
        change = note_change(memory_id, content, tags, max_chars=app.settings.max_content_chars)
        _, new = await app.memories.update(change)
    return _redirect(request, f"/conversations/{old.conversation_id}", "updated", f"m-{new.memory.id}")


async def delete_memory(request: Request) -> Response:
    app = _app(request)
    memory = await app.memories.get(fields.memory_id("memory_id", request.path_params["memory_id"]))
    page = f"/conversations/{memory.conversation_id}"
    return await _after_confirming(
        request,
        lambda: app.memories.delete(memory.id),
        page,
        (page, "memory-deleted"),
        what="memory",
        memory=memory,
    )


async def end_conversation(request: Request) -> Response:
    await checked_form(request)
    conversation_id = _conversation_id(request)
    with _writing(request):
        await _app(request).conversations.end(conversation_id)
    return _redirect(request, f"/conversations/{conversation_id}", "ended")


async def delete_conversation(request: Request) -> Response:
    app = _app(request)
    current = await app.conversations.get(_conversation_id(request))
    total = await app.conversations.memory_total(current.id)  # what `forget` counts: versions and messages too
    return await _after_confirming(request, lambda: app.conversations.delete(current.id),
                                   f"/conversations/{current.id}", ("/", "conversation-deleted"),
                                   what="conversation", conversation=current, total=total)


async def review_change(request: Request) -> Response:
    """One click on the changed-facts page: undo a supersession, or confirm it."""
    form = await checked_form(request)
    verdict = _field(form.get("verdict"))
    older = fields.memory_id("older", _field(form.get("older")))
    newer = fields.memory_id("newer", _field(form.get("newer")))
    with _writing(request):
        done = await _app(request).superseding.review(older, newer, verdict)
    return _redirect(request, "/changes", done.state)


def _conversation_id(request: Request) -> str:
    """The path's conversation id, checked."""
    return fields.required_conversation_id(
        "conversation_id", request.path_params["conversation_id"], "open a conversation from the list"
    )


async def _after_confirming(
    request: Request, delete: Callable[[], Awaitable[object]], back: str, then: tuple[str, str], **shown: Any
) -> Response:
    """A delete: GET shows what would go, with a button; the POST from that page deletes."""
    if request.method == "GET":
        return _page(request, "confirm.html", action=request.url.path, back=back, **shown)
    await checked_form(request)
    with _writing(request):
        await delete()
    return _redirect(request, *then)


async def import_file(request: Request) -> Response:
    if request.method == "GET":
        return _page(request, "import.html", result=None)
    form = await checked_form(request)
    upload = form.get("file")
    if upload is None or isinstance(upload, str):
        raise InvalidInputError("file", "is missing", f"choose {EXPECTED}")
    # The same reading as `ollama-mcp import`: from a file of the upload's name (its extension is
    # checked against its content), streamed, told apart by content.
    with tempfile.TemporaryDirectory(prefix="ollama-mcp-upload-") as folder:
        saved = Path(folder) / (Path(upload.filename or "upload").name or "upload")
        with saved.open("wb") as out:
            while chunk := await upload.read(1 << 20):
                out.write(chunk)
        source = await anyio.to_thread.run_sync(lambda: open_source(saved, field="file", shown=saved.name))
        with source, _writing(request):
            report = await _app(request).archive.import_source(source)
    result = (f"Imported {report.new_conversations:,} new conversation(s) and {report.new_turns:,} new memories "
              f"from {FORMAT_NAMES[report.format]}.")
    if report.cut_turns:
        cut = cut_notice(report.cut_turns)
        result += f" {cut[:1].upper()}{cut[1:]}."
    if report.skipped:
        named = "; ".join(f"{s.where}: {s.reason}" for s in report.skipped[:5])
        result += f" Skipped {len(report.skipped):,}: {named}"
    return _page(request, "import.html", result=result)


# -- plumbing -------------------------------------------------------------------------------------


def _app(request: Request) -> App:
    return visitor(request).app


@contextmanager
def _writing(request: Request) -> Iterator[None]:
    """A write of the view: audited through the door "ui", as the visitor's token (if any)."""
    actor = visitor(request).actor
    with audit.through("ui"), caller.acting(f"ui:{actor}" if actor else caller.PROCESS, actor):
        yield


def _page(request: Request, template: str, code: int = 200, **values: Any) -> HTMLResponse:
    done = DONE.get(request.query_params.get("done", ""))
    html = request.app.state.templates.get_template(template).render(
        csrf=visitor(request).csrf, root=request.scope.get("root_path", ""), done=done, **values,
    )
    return HTMLResponse(html, code)


def _redirect(request: Request, path: str, done: str, anchor: str = "") -> RedirectResponse:
    """To ``path`` of the view (below ``/ui`` on the shared server), saying what was done."""
    where = request.scope.get("root_path", "") + path
    return RedirectResponse(f"{quote(where)}?done={done}" + (f"#{anchor}" if anchor else ""), status_code=303)


def _page_number(raw: str, pages: int = 1_000_000) -> int:
    """The ``page`` a link asks for, from 1 to ``pages``."""
    return fields.integer("page", int(raw) if re.fullmatch(r"[0-9]{1,9}", raw) else raw, 1, pages)


def _field(value: object) -> str:
    return value if isinstance(value, str) else ""


async def _product_error(request: Request, exc: Exception) -> Response:
    status = (
        404 if isinstance(exc, NotFoundError) else 400 if isinstance(exc, InvalidInputError)
        else 409 if isinstance(exc, ConversationClosedError) else 502 if isinstance(exc, OllamaError) else 503
    )
    return _page(request, "error.html", status, message=str(exc))


async def _refused(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, Refused)
    return _page(request, "error.html", exc.status, message=exc.message)
