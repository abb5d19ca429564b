"""Export and import: a page of one conversation for the export tool and the resources, the whole
store as the CLI and the browser view write it, an export document read back, and other tools'
histories brought in. The format itself is ``export``'s; other tools' are ``imports``'."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal

import anyio

from ollama_mcp import audit
from ollama_mcp.domain import Conversation, ConversationQuery, Export, Memory, counted, utc_now
from ollama_mcp.errors import ConversationNotFoundError, ImportBrokeOff, InvalidInputError, OllamaMcpError
from ollama_mcp.services import export
from ollama_mcp.services.indexer import Indexer
from ollama_mcp.services.passages import MIN_SHARE, page_bounds
from ollama_mcp.services.redacting import Redacting
from ollama_mcp.services.superseding import Superseding
from ollama_mcp.storage.protocols import Storage

if TYPE_CHECKING:  # the readers of other tools' histories load when something is imported, not with
    # the app: about 4 ms of its import, on the way to a new process's first search
    from ollama_mcp.services.imports.chats import Chat, Skipped
    from ollama_mcp.services.imports.sources import Source

ExportFormat = Literal["markdown", "json"]
IMPORT_BATCH = 50  # chats parsed per hop to a worker thread (a large export's parsing never blocks the loop)


@dataclass
class ImportReport:
    """What an import of another tool's history read, added and skipped (with why)."""

    format: str
    dry_run: bool = False
    turns: int = 0  # turns and notes read (after --since)
    new_conversations: int = 0
    new_turns: int = 0
    skipped: list[Skipped] = field(default_factory=list)
    summaries_queued: int = 0  # conversations whose summary was asked for (--summarize)
    # What the user deleted since an earlier import, left out: whole conversations, and turns (those
    # of the conversations too)
    deleted_conversations: int = 0
    deleted_turns: int = 0
    restored: int = 0  # of those, brought back on purpose (--restore-deleted)
    cut_turns: int = 0  # turns longer than a memory may be, kept up to chats.MAX_TURN_CHARS
    redacted: Counter[str] = field(default_factory=Counter)  # secrets replaced, by kind
    recorded_live: int = 0  # sessions left out: the hooks recorded them as they happened


def cut_notice(turns: int) -> str:
    """What an import says of the turns it cut (``ImportReport.cut_turns``)."""
    from ollama_mcp.services.imports.chats import MAX_TURN_CHARS  # noqa: PLC0415  (see the imports)

    return (f"cut {counted(turns, 'turn')} longer than {MAX_TURN_CHARS:,} characters at that length (a memory holds"
            " no more); the rest of each was not imported")


class Archive:
    """Export and import over a store; new memories are handed to the indexer to embed."""

    def __init__(
        self, store: Storage, indexer: Indexer, superseding: Superseding, redacting: Redacting, *, page_chars: int,
        summaries: bool,
    ) -> None:
        self._store = store
        self._redacting = redacting
        self._superseding = superseding
        self._indexer = indexer
        self._page_chars = page_chars  # about how many characters a page of an export holds
        self._summaries = summaries  # a chat model is configured to write summaries

    async def export_conversation(
        self, conversation_id: str, format: ExportFormat = "markdown", page: int = 1
    ) -> Export:
        """One page of a conversation as Markdown or JSON: at most ``export.PAGE_ITEMS`` memories
        and messages and about ``_page_chars`` characters (``passages.page_bounds``), so that a
        page fits a client's context; a memory longer than a page alone shows its start, marked,
        and how to read it whole."""
        target, number = conversation_id, page
        overhead = export.ITEM_OVERHEAD[format]
        bounds = page_bounds(
            [n + overhead for n in await self._store.content_lengths(target)], self._page_chars, export.PAGE_ITEMS
        )
        pages = len(bounds)
        if number > pages:
            raise InvalidInputError(
                "page", f"is {number}, but the conversation has {pages} page(s)", f"pass 1 to {pages}"
            )
        offset, count = bounds[number - 1]
        conversation, memories, _ = await self._store.conversation_snapshot(target, offset, count)
        allowance = max(self._page_chars - overhead, MIN_SHARE)
        shown = [export.clipped(m, allowance) for m in memories]
        if format == "json":
            data = export.conversation_json(conversation, shown)
            for record, memory in zip(data["memories"], memories, strict=True):
                if len(memory.content) > allowance:
                    record["content_chars"] = len(memory.content)  # content shows its start only
            return Export(conversation.id, "json", number, pages, None, data)
        changed = await self._superseding.superseded_among(memories)
        return Export(
            conversation.id, "markdown", number, pages, export.markdown(conversation, shown, number, pages, changed),
            None,
        )

    async def snapshots(self, conversation_id: str | None = None) -> list[tuple[Conversation, list[Memory]]]:
        """Every conversation (or the one given) with all its memories, oldest conversation first."""
        given = conversation_id
        ids = [given] if given else await self._store.conversation_ids()
        found = []
        for cid in ids:
            try:
                conversation, memories, _ = await self._store.conversation_snapshot(cid)
            except ConversationNotFoundError:
                if given:
                    raise
                continue  # deleted while exporting the others
            found.append((conversation, memories))
        return found

    async def export_all(self, conversation_id: str | None = None) -> dict[str, Any]:
        """The whole store (or one conversation) as an export document, every memory included."""
        return export.document_of(await self.snapshots(conversation_id))

    async def export_text(self, conversation_id: str | None, fmt: str) -> tuple[str, int]:
        """The whole store (or one conversation) as export text, JSON (``import`` reads it back) or
        Markdown, and how many conversations it holds: what the CLI and the browser view write."""
        found = await self.snapshots(conversation_id)
        if fmt == "json":
            return export.dumps(export.document_of(found)) + "\n", len(found)
        changed = await self._superseding.superseded_among([m for _, memories in found for m in memories])
        return "\n---\n\n".join(export.markdown(c, m, 1, 1, changed) for c, m in found), len(found)

    async def import_source(
        self, source: Source, *, since: str | None = None, dry_run: bool = False,
        progress: Callable[[], None] | None = None, summarize: bool = False, restore_deleted: bool = False,
    ) -> ImportReport:
        """Import what ``sources.open_source`` opened: an export of ours (ids kept, checked whole
        first) or another tool's chats (``import_chats``). ``summarize``: queue a summary of each
        conversation that gained turns (another tool's chats only; written in the background,
        within the chat-model budget)."""
        if source.format != "ollama-mcp":
            return await self.import_chats(source.format, source.chats, since=since, dry_run=dry_run,
                                           progress=progress, summarize=summarize, restore_deleted=restore_deleted)
        if summarize:
            raise InvalidInputError(
                "--summarize", "applies to other tools' histories only",
                "leave it out: an ollama-mcp export carries its summaries",
            )
        records = export.read_document(source.document)
        report = ImportReport("ollama-mcp", dry_run, sum(len(r.memories) for r in records))
        if dry_run:
            for record in records:
                await self._count_new(report, record)
        else:
            def counted(done: int, total: int) -> None:  # the file was read whole: count conversations
                source.position = lambda: source.size * done // max(total, 1)
                if progress is not None:
                    progress()

            report.new_conversations, report.new_turns = await self.import_document(source.document, counted)
            counted(1, 1)
        return report

    async def import_chats(
        self, fmt: str, chats: Iterator[Chat | Skipped], *, since: str | None = None, dry_run: bool = False,
        progress: Callable[[], None] | None = None, summarize: bool = False, restore_deleted: bool = False,
    ) -> ImportReport:
        """Import the chats another tool exported (``services.imports``), each in one transaction:
        ids derived from the source's, so a second import adds nothing and a newer export only its
        new turns. A chat that cannot be read is skipped with its reason; the others are imported.
        ``since``: turns before it are left out. What the user deleted of an earlier import of
        them stays deleted (its ids are remembered, ``deleted_imports``) unless ``restore_deleted``.
        ``dry_run``: count what would be added, write nothing. Embeddings are left to the background,
        and so are summaries: none unless
        ``summarize`` asks, and then within the chat-model budget (``chat_budget``)."""
        from ollama_mcp.services.imports.chats import Skipped, record_of, was_cut  # noqa: PLC0415  (see the imports)

        if summarize and not self._summaries:
            raise InvalidInputError(
                "--summarize", "needs a chat model, and OLLAMA_MCP_CHAT_MODEL is none",
                "set OLLAMA_MCP_CHAT_MODEL to a chat model such as qwen2.5:3b, or leave --summarize out",
            )
        report = ImportReport(fmt, dry_run=dry_run)
        now = utc_now()
        broken: OllamaMcpError | None = None
        while not broken:
            batch, broken = await anyio.to_thread.run_sync(_take, chats)
            if not batch:
                break
            for item in batch:
                if isinstance(item, Skipped):
                    report.skipped.append(item)
                    continue
                chat = _since(item, since)
                if not chat.turns:
                    if since is None:
                        report.skipped.append(Skipped(f"{item.source_id} ({item.title or 'untitled'})",
                                                      "holds no messages"))
                    continue
                record = await self._without_deleted(record_of(chat, now), report, restore_deleted, dry_run)
                if record is None:
                    continue
                if await self._recorded_live(record.conversation.id, chat.metadata.get("session_id")):
                    report.recorded_live += 1  # the hooks kept this session as it happened: once is enough
                    continue
                report.turns += len(record.memories)
                report.cut_turns += sum(was_cut(m.content) for m in record.memories)
                if dry_run:
                    await self._count_new(report, record)
                    continue
                memories, redacted = await self._redacting.memories(record.conversation, record.memories)
                record = replace(record, memories=memories)
                report.redacted.update(dict(redacted))
                with audit.recording("import", record.conversation.id,
                                     arguments={"source": chat.source, "source_id": chat.source_id}, redacted=redacted):
                    created, added, queued = await self._store.import_conversation(
                        record.conversation, record.memories, None, summarize_at=now if summarize else None
                    )
                report.new_conversations += created
                report.new_turns += added
                report.summaries_queued += queued
            if progress is not None:
                progress()
        if report.new_turns:
            self._indexer.added()
        if broken is not None:  # the file breaks off: what came before it is in, and the error says so
            verb = "would be" if dry_run else "was" if report.new_conversations == 1 else "were"
            raise ImportBrokeOff(f"{broken} The {counted(report.new_conversations, 'new conversation')} before the "
                                 f"break {verb} imported.")
        return report

    async def _without_deleted(
        self, record: export.ConversationRecord, report: ImportReport, restore: bool, dry_run: bool
    ) -> export.ConversationRecord | None:
        """``record`` without what the user deleted of it since an earlier import (None: the whole
        conversation), counted in ``report``; with ``restore``, whole again, and no longer deleted."""
        ids = [record.conversation.id, *(m.id for m in record.memories)]
        gone = await self._store.deleted_imports(ids)
        if not gone:
            return record
        if restore:
            report.restored += len(gone)
            if not dry_run:
                await self._store.restore_deleted_imports(sorted(gone))
            return record
        if record.conversation.id in gone:
            report.deleted_conversations += 1
            report.deleted_turns += len(record.memories)
            return None
        report.deleted_turns += len(gone)
        return replace(record, memories=[m for m in record.memories if m.id not in gone])

    async def _recorded_live(self, conversation_id: str, session_id: object) -> bool:
        """Whether another conversation (the hooks') already holds the session ``session_id``."""
        if not isinstance(session_id, str):
            return False
        query = ConversationQuery(metadata=(("session_id", session_id),), limit=5)
        return any(c.id != conversation_id for c in await self._store.list_conversations(query))

    async def _count_new(self, report: ImportReport, record: export.ConversationRecord) -> None:
        """A dry run's count: whether ``record``'s conversation and which of its memories are new."""
        known, present = await self._store.present(record.conversation.id, [m.id for m in record.memories])
        report.new_conversations += not known
        report.new_turns += len(record.memories) - len(present)

    async def import_document(
        self, data: object, progress: Callable[[int, int], None] | None = None
    ) -> tuple[int, int]:
        """Import an export document (ids kept; importing twice changes nothing). Everything is
        checked before anything is written: ``data`` is the document as JSON gave it, and reading
        it (``export.read_document``) is its parse, the one place its shape is checked.
        ``progress(done, total)``: called after each conversation. Returns (new conversations, new
        memories)."""
        records = export.read_document(data)
        new_conversations = new_memories = 0
        for done, record in enumerate(records, 1):
            if progress is not None:
                progress(done - 1, len(records))
            memories, redacted = await self._redacting.memories(record.conversation, record.memories)
            record = replace(record, memories=memories)
            with audit.recording("import", record.conversation.id, arguments=record.memories, redacted=redacted):
                created, added, _ = await self._store.import_conversation(
                    record.conversation, record.memories, record.summarized_through_id
                )
            new_conversations += created
            new_memories += added
        if new_memories:
            self._indexer.added()  # vectors are not exported: embed them with this model
        return new_conversations, new_memories


def _take(chats: Iterator[Chat | Skipped]) -> tuple[list[Chat | Skipped], OllamaMcpError | None]:
    """The next ``IMPORT_BATCH`` chats, and the error that ended the file early, if it did."""
    batch: list[Chat | Skipped] = []
    try:
        for item in chats:
            batch.append(item)
            if len(batch) == IMPORT_BATCH:
                break
    except OllamaMcpError as exc:
        return batch, exc
    return batch, None


def _since(chat: Chat, since: str | None) -> Chat:
    """``chat`` without its turns before ``since`` (a turn of unknown time goes with its chat's start)."""
    if since is None:
        return chat
    kept = [t for t in chat.turns if (t.at or chat.created_at or since) >= since]
    return chat if len(kept) == len(chat.turns) else replace(chat, turns=kept)
