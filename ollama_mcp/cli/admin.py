"""The CLI's maintenance commands over the app: export, import, reembed, prune, migrate.

Each opens the store like the server does (so several processes stay safe) and reports what it
did. Long work shows a progress line with an ETA on a terminal and stays quiet when piped.
"""

from __future__ import annotations

import re
import shutil
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from ollama_mcp import audit, redaction
from ollama_mcp.app import open_app
from ollama_mcp.config import LOCAL_PRINCIPAL, Settings
from ollama_mcp.domain import AccessToken, Shrunk, WriteRecord, counted, format_timestamp
from ollama_mcp.errors import InvalidInputError, OllamaMcpError, StorageError
from ollama_mcp.inputs import fields
from ollama_mcp.services import export, stores, tokens
from ollama_mcp.services.archive import ImportReport, cut_notice
from ollama_mcp.services.imports.formats import FORMAT_NAMES, HISTORY_FOLDERS
from ollama_mcp.services.imports.sources import Source, open_source
from ollama_mcp.services.secret_sweep import SweepReport
from ollama_mcp.services.superseding import Supersession
from ollama_mcp.services.transfer import AccessReport, CopyReport

if TYPE_CHECKING:  # a name for what the token service hands back; the CLI never opens a store itself
    from ollama_mcp.storage.protocols import TokenStorage

SKIPS_SHOWN = 20  # skipped conversations or lines named in the summary; the rest are counted


class ProgressLine:
    """``done/total (pct) ETA`` rewritten in place on a terminal; nothing when not a terminal."""

    def __init__(self, label: str, total: int, stream: TextIO = sys.stderr) -> None:
        self.label = label
        self.total = total
        self.stream = stream
        self.enabled = stream.isatty()
        self.started = time.monotonic()
        self._last = 0.0

    def update(self, done: int) -> None:
        now = time.monotonic()
        if not self.enabled or (now - self._last < 0.2 and done < self.total):
            return
        self._last = now
        elapsed = now - self.started
        eta = "" if done == 0 else f" ETA {_duration(elapsed / done * max(self.total - done, 0))}"
        pct = 100 * done / self.total if self.total else 100
        self.stream.write(f"\r{self.label} {done:,}/{self.total:,} ({pct:.0f}%){eta}   ")
        self.stream.flush()

    def close(self) -> None:
        if self.enabled:
            self.stream.write("\n")


async def export_store(settings: Settings, conversation_id: str | None, fmt: str) -> tuple[str, int]:
    """The store (or one conversation) as JSON or Markdown text, and how many conversations it
    holds. Nothing is written: the caller writes the text once it is complete."""
    _must_exist(settings, "export")
    given = fields.conversation_id("conversation_id", conversation_id)
    async with open_app(settings, background=False) as app:
        return await app.archive.export_text(given, fmt)


def import_source_of(
    file: str | None, history: str | None, fmt: str | None, env: Mapping[str, str]
) -> tuple[str, str | None]:
    """What ``import`` reads, and in which format: FILE, or with ``--claude-code`` (``--codex``,
    ``--gemini``) and no FILE, that client's own session folder for this user."""
    if history is None:
        if file is None:
            raise InvalidInputError("FILE", "is missing", "pass the file or folder to import, or --claude-code, "
                                    "--codex or --gemini to import that client's history from where it keeps it")
        return file, fmt
    if fmt not in (None, history):
        raise InvalidInputError("--format", f"is {fmt} but --{history} was given", "pass one of them")
    if file is not None:
        return file, history
    variable, home_folder, sessions = HISTORY_FOLDERS[history]
    base = Path(env[variable]) if env.get(variable) else Path(env.get("HOME") or Path.home()) / home_folder
    folder = base / sessions
    if not folder.is_dir():
        raise InvalidInputError(f"--{history}", f"found no {FORMAT_NAMES[history]} at {folder}",
                                f"pass the folder they are in as FILE (or set {variable})")
    return str(folder), history


async def import_file(
    settings: Settings, path: str, fmt: str | None = None, since: str | None = None, dry_run: bool = False,
    summarize: bool = False, restore_deleted: bool = False,
) -> ImportReport:
    """Import a file ('-': standard input) or a Claude Code projects folder, in the format its
    content shows (``fmt`` overrides): another tool's history, or an ollama-mcp export. What the
    user deleted of an earlier import stays deleted unless ``restore_deleted``."""
    since_at = fields.timestamp("--since", since) if since else None
    if path == "-":
        with tempfile.TemporaryDirectory(prefix="ollama-mcp-import-") as folder:
            spooled = Path(folder) / "stdin"
            with spooled.open("wb") as out:
                shutil.copyfileobj(sys.stdin.buffer, out)
            with open_source(spooled, fmt) as source:
                return await _import(settings, source, since_at, dry_run, summarize, restore_deleted)
    with open_source(Path(path), fmt) as source:
        return await _import(settings, source, since_at, dry_run, summarize, restore_deleted)


async def _import(
    settings: Settings, source: Source, since: str | None, dry_run: bool, summarize: bool, restore_deleted: bool
) -> ImportReport:
    if source.format == "ollama-mcp":
        export.read_document(source.document)  # checked whole before the store is even opened
    progress = ProgressLine(f"importing {source.format}", source.size)
    try:
        async with open_app(settings, background=False) as app:
            with audit.through("import"):
                return await app.archive.import_source(
                    source, since=since, dry_run=dry_run, summarize=summarize, restore_deleted=restore_deleted,
                    progress=lambda: progress.update(min(source.position(), source.size)),
                )
    finally:
        progress.close()


def import_summary(report: ImportReport, calls_per_hour: int | None = None) -> str:
    """What ``ollama-mcp import`` prints: what was (or would be) added, what was skipped and why,
    and the summaries queued with how long the chat-model budget (``calls_per_hour``) takes for them."""
    verb = "would import" if report.dry_run else "imported"
    line = (f"{report.format}: {verb} {report.new_conversations:,} new conversation(s) and {report.new_turns:,} new "
            f"turns ({report.turns - report.new_turns:,} of {report.turns:,} were already present)")
    if report.skipped:
        shown = "; ".join(f"{s.where}: {s.reason}" for s in report.skipped[:SKIPS_SHOWN])
        more = f"; and {len(report.skipped) - SKIPS_SHOWN:,} more" if len(report.skipped) > SKIPS_SHOWN else ""
        line += f"\nskipped {len(report.skipped):,}: {shown}{more}"
    if report.cut_turns:
        line += f"\n{cut_notice(report.cut_turns)}"
    if report.deleted_conversations or report.deleted_turns:
        line += (f"\nleft out {counted(report.deleted_conversations, 'conversation')} and"
                 f" {counted(report.deleted_turns, 'turn')} you deleted since an earlier import"
                 " (--restore-deleted brings them back)")
    if report.restored:
        line += f"\nbrought back {counted(report.restored, 'conversation or turn', 'conversations and turns')}" \
                " you had deleted (--restore-deleted)"
    if report.recorded_live:
        line += (f"\nleft out {counted(report.recorded_live, 'session')} the hooks recorded as "
                 "they happened (already in memory)")
    if report.redacted:
        replaced = counted(sum(report.redacted.values()), "secret")
        line += (f"\nreplaced {replaced} ({redaction.describe(dict(report.redacted))}) with placeholders before"
                 " storing (OLLAMA_MCP_REDACT=off keeps text verbatim)")
    if report.summaries_queued:
        line += f"\nqueued {counted(report.summaries_queued, 'summary', 'summaries')}: the server writes them in the " \
                "background"
        if calls_per_hour:
            hours = report.summaries_queued / calls_per_hour
            calls = counted(calls_per_hour, "chat-model call")
            line += f", at most {calls} an hour (OLLAMA_MCP_CHAT_CALLS_PER_HOUR): about {hours:,.1f} hour(s) or more"
        elif calls_per_hour == 0:
            line += ", but OLLAMA_MCP_CHAT_CALLS_PER_HOUR=0 pauses them until it is raised"
    return line


async def reembed(settings: Settings, model: str | None, force: bool) -> tuple[int, str]:
    """Embed every memory that lacks a vector of ``model`` (default: the configured one); with
    ``force``, drop that model's vectors first. Resumable: run again after an interruption.
    Returns (memories embedded, model)."""
    chosen = replace(settings, embed_model=model or settings.embed_model)
    async with open_app(chosen, background=False) as app:
        if force:
            await app.memories.forget_vectors()
        total = await app.indexer.pending_count()
        progress = ProgressLine(f"embedding with {chosen.embed_model}", total)
        done = 0
        try:
            progress.update(0)
            while True:
                embedded = await app.indexer.backfill_once()
                if not embedded:
                    break
                done += embedded
                progress.update(min(done, total))
        finally:
            progress.close()
        left = await app.indexer.pending_count()
        if left:
            raise OllamaMcpError(
                f"{left:,} memories could not be embedded with {chosen.embed_model!r}; run `ollama-mcp doctor`."
            )
    return done, chosen.embed_model


async def prune(settings: Settings, dry_run: bool) -> list[tuple[str, str]]:
    """Apply retention now (TTLs and OLLAMA_MCP_RETENTION_DAYS); returns (id, name) of the
    conversations deleted, or that would be with ``dry_run``."""
    _must_exist(settings, "prune")
    async with open_app(settings, background=False) as app:
        expired = await app.retention.expired()
        names = [(c.id, c.name or "unnamed") for c in expired]
        if not dry_run:
            deleted = set(await app.retention.sweep())
            names = [(cid, name) for cid, name in names if cid in deleted]
    return names


async def shrink(settings: Settings) -> list[tuple[str, Shrunk]] | None:
    """``stores.shrink``, once the store is known to exist (None on PostgreSQL)."""
    if settings.store_file is not None:
        _must_exist(settings, "shrink")
    return await stores.shrink(settings)


async def migrate(settings: Settings, destination: Settings) -> tuple[dict[str, CopyReport], AccessReport]:
    """``stores.migrate`` with a progress line per store copied."""
    return await stores.migrate(settings, destination, _progress)


@contextmanager
def _progress(label: str) -> Iterator[Callable[[int, int], None]]:
    bar = ProgressLine(label, 0)

    def update(done: int, total: int) -> None:
        bar.total = total
        bar.update(done)

    yield update
    bar.close()


def _duration(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"


_AGE = re.compile(r"^\s*(\d+)\s*([dwmy])\s*$")
_DAYS = {"d": 1, "w": 7, "m": 30, "y": 365}


async def forget(
    settings: Settings, conversation_id: str | None, older_than: str | None, everything: bool, yes: bool,
    dry_run: bool,
) -> tuple[list[tuple[str, str, int]], int, int]:
    """Delete one conversation, those idle for longer than ``older_than``, or all (with ``yes``),
    through the service's one delete path; with ``older_than``, also the memories stored longer
    ago in the conversations that are kept (a long-lived one, such as a client's anonymous
    conversation, never goes idle). Returns (id, name, memories) of each conversation deleted,
    their memories' total, and the older memories deleted from the others."""
    if everything and not yes and not dry_run:
        raise InvalidInputError(
            "--all", "deletes every conversation", "add --yes to confirm, or --dry-run to count first"
        )
    cutoff = None
    if older_than is not None:
        match = _AGE.match(older_than)
        if match is None or int(match.group(1)) == 0:
            raise InvalidInputError("--older-than", f"is {older_than!r}", "give an age such as 90d, 12w, 6m or 1y")
        days = int(match.group(1)) * _DAYS[match.group(2)]
        cutoff = format_timestamp(datetime.now(UTC) - timedelta(days=days))
    _must_exist(settings, "forget")
    async with open_app(settings, background=False) as app:
        if conversation_id is not None:
            # Any conversation, ended ones too (every imported chat has ended): a delete, not a store.
            given = fields.conversation_id("--conversation", conversation_id)
            assert given is not None
            ids = [(await app.conversations.get(given)).id]
        elif cutoff is not None:
            ids = await app.conversations.ids(idle_before=cutoff)
        else:
            ids = await app.conversations.ids()
        chosen = []
        for target in ids:
            conversation = await app.conversations.get(target)
            count = await app.conversations.memory_total(target)
            chosen.append((conversation.id, conversation.name or "unnamed", count))
        if not dry_run:
            for target, _, _ in chosen:
                await app.conversations.delete(target)
        older = 0
        if cutoff is not None and conversation_id is None:
            kept = set(await app.conversations.ids()) - {c for c, _, _ in chosen}
            for target in sorted(kept):
                older += await app.memories.forget_older(cutoff, target, dry_run=dry_run)
    return chosen, sum(count for _, _, count in chosen), older


async def write_log(settings: Settings, since: str | None, limit: int) -> list[WriteRecord]:
    """The write audit, newest first: every write through any door, without its text."""
    start = fields.timestamp("--since", since) if since else None
    _must_exist(settings, "show")
    async with open_app(settings, background=False) as app:
        return await app.changes.write_records(start, limit)


async def conflicts(
    settings: Settings, undo: Sequence[str] | None, confirm: Sequence[str] | None, limit: int,
) -> tuple[Supersession | None, list[Supersession], list[Supersession]]:
    """The review of changed facts (``Superseding``): an undo or a confirm when asked, then (to
    review, recent)."""
    _must_exist(settings, "review")
    async with open_app(settings, background=False) as app:  # the door: the CLI's, the default
        done = None
        for verdict, pair in (("undo", undo), ("confirm", confirm)):
            if pair:
                done = await app.superseding.review(
                    fields.memory_id("OLDER", pair[0]), fields.memory_id("NEWER", pair[1]), verdict)
        open_, recent = await app.superseding.listed(limit)
        return done, open_, recent


async def redact_store(settings: Settings, apply: bool) -> SweepReport:
    """``redact --scan [--apply]``: the secrets already in the store, counted, and replaced when
    ``apply`` (services/secret_sweep.py); a progress line on a terminal."""
    _must_exist(settings, "scan")
    progress = ProgressLine("scanning for secrets", 0)

    def shown(done: int, newest: int) -> None:
        progress.total = newest
        progress.update(done)

    try:
        async with open_app(settings, background=False) as app:
            return await app.secret_sweep.sweep(apply, progress=shown)
    finally:
        progress.close()


def sweep_text(report: SweepReport) -> str:
    """What ``redact`` prints: what was read, what held a secret (by kind), what was done."""
    kinds = redaction.describe(dict(report.found))
    held = (f"{counted(report.with_secrets, 'memory', 'memories')} and "
            f"{counted(report.other_texts, 'conversation name or summary', 'conversation names or summaries')}")
    if not report.found:
        return f"scanned {counted(report.memories, 'memory', 'memories')}: no secrets found"
    if not report.applied:
        return (f"scanned {counted(report.memories, 'memory', 'memories')}: {held} hold secrets ({kinds}). "
                "Run `ollama-mcp redact --scan --apply` to replace them.")
    return f"replaced the secrets ({kinds}) of {held}; {report.purged}"


def supersessions_text(to_review: Sequence[Supersession], recent: Sequence[Supersession]) -> str:
    """The review lists as the terminal shows them: each pair's ids, times, texts and grounds."""
    lines = [f"to review: {len(to_review)}" + ("" if to_review else " (nothing to review)")]
    for title, shown in (("", to_review), ("recent supersessions:", recent)):
        if title:
            lines.append(title if shown else f"{title} none")
        for s in shown:
            flag = f" [{s.state}]" if s.state != "open" else ""
            lines.append(f"  OLDER {s.older.id}  {s.older.occurred_at[:10]}  {_clip(s.older.content)}")
            lines.append(f"  NEWER {s.newer.id}  {s.newer.occurred_at[:10]}  {_clip(s.newer.content)}")
            lines.append(f"        {s.grounds}; confidence {s.confidence:.1f}{flag}")
    if to_review:
        lines.append("undo one: ollama-mcp conflicts --undo OLDER NEWER; confirm: --confirm OLDER NEWER")
    return "\n".join(lines)


def _clip(text: str, width: int = 80) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


async def create_token(settings: Settings, name: str, principal: str | None) -> tuple[AccessToken, str]:
    """A new bearer token (kept in the local principal's store, as a hash) and its secret."""
    async with _token_store(settings) as store:
        return await tokens.create(store, name, principal)


async def list_tokens(settings: Settings) -> list[AccessToken]:
    async with _token_store(settings, must_exist="list") as store:
        return await store.list_tokens()


async def revoke_token(settings: Settings, name: str) -> None:
    async with _token_store(settings, must_exist="revoke") as store:
        await tokens.revoke(store, name)


@asynccontextmanager
async def _token_store(settings: Settings, must_exist: str | None = None) -> AsyncIterator[TokenStorage]:
    """The local principal's store, which keeps every principal's tokens (just the store: no app)."""
    if must_exist is not None:
        _must_exist(settings.for_principal(LOCAL_PRINCIPAL), must_exist)
    async with tokens.registry(settings) as store:
        yield store


def _must_exist(settings: Settings, what: str) -> None:
    """Commands that only read (or remove) must not create an empty SQLite store on the way: a
    mistyped OLLAMA_MCP_DB would otherwise look like a store that holds nothing."""
    path = settings.store_file
    if path is not None and not path.exists():
        raise StorageError(
            f"There is no memory database at {path}, so there is nothing to {what}; nothing was created. "
            "Check OLLAMA_MCP_DB (the server creates the file when it first stores a memory)."
        )
