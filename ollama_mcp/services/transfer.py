"""Copying a whole store to another backend (``ollama-mcp migrate --to``): every conversation with
every memory version, message and summary, its jobs and audit rows, every vector, and the links
between conversations (copied last, when both ends of each are there).

Conversation by conversation, each step idempotent: a conversation's rows go in one transaction
(ids kept; what exists is left alone), then its vectors (rows present are skipped), then its jobs
and audit rows (once). A copy killed half-way is resumed by running it again, and a second run
adds nothing. At the end every conversation's rows are counted on both sides; any difference is
an error that names the conversation and the table.

The HTTP server's tokens (their hashes) and shares live in the local principal's store and are
copied with it (``copy_access``); each other principal's store is copied as a store of its own.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

from ollama_mcp.errors import NotFoundError, StorageError
from ollama_mcp.storage.protocols import Storage


@dataclass
class CopyReport:
    conversations: int = 0
    memories: int = 0  # added to the target by this run
    vectors: int = 0
    extras: int = 0  # conversations whose jobs and audit rows this run copied
    relations: int = 0  # links between conversations added to the target by this run
    totals: dict[str, int] = field(default_factory=dict)  # what the source holds, counted


async def copy_store(
    source: Storage, target: Storage, progress: Callable[[int, int], None] | None = None
) -> CopyReport:
    """Copy everything in ``source`` into ``target``; then check the counts (``StorageError`` on a difference)."""
    report = CopyReport()
    ids = await source.conversation_ids()
    async with target.bulk_load():
        for done, conversation_id in enumerate(ids, start=1):
            conversation, memories, _ = await source.conversation_snapshot(conversation_id)
            by_seq = {m.seq: m.id for m in memories}
            through = by_seq.get(conversation.summarized_through) if conversation.summarized_through else None
            new, added, _ = await target.import_conversation(conversation, memories, through)
            report.conversations += int(new)
            report.memories += added
            vectors = await source.conversation_vectors(conversation_id)
            if vectors:
                _, copied, _ = await target.conversation_snapshot(conversation_id)
                seq_of = {m.id: m.seq for m in copied}
                report.vectors += await target.insert_embeddings(
                    [replace(row, memory_seq=seq_of[memory_id]) for memory_id, row in vectors]
                )
            jobs, audit = await source.conversation_extras(conversation_id)
            report.extras += int(await target.import_extras(conversation_id, jobs, audit))
            if progress is not None:
                progress(done, len(ids))
        for conversation_id in ids:  # once both ends of every link are there
            recorded = await source.relations(conversation_id, recorded=True)
            report.relations += await target.import_relations(conversation_id, recorded)
    report.totals = await check_counts(source, target, ids)
    return report


async def check_counts(source: Storage, target: Storage, ids: list[str]) -> dict[str, int]:
    """Count each conversation's memories, vectors, jobs and audit rows on both sides; raise on any
    difference. Returns the source's totals."""
    totals = {"conversations": len(ids), "memories": 0, "vectors": 0, "jobs": 0, "audit": 0, "relations": 0}
    for conversation_id in ids:
        counts = []
        for store in (source, target):
            try:
                _, _, total = await store.conversation_snapshot(conversation_id, limit=0)
            except NotFoundError:
                counts.append({"memories": 0, "vectors": 0, "jobs": 0, "audit": 0, "relations": 0})  # not copied
                continue
            jobs, audit = await store.conversation_extras(conversation_id)
            vectors = await store.conversation_vectors(conversation_id)
            recorded = await store.relations(conversation_id, recorded=True)
            counts.append({"memories": total, "vectors": len(vectors), "jobs": len(jobs), "audit": len(audit),
                           "relations": len(recorded)})
        for table, count in counts[0].items():
            if counts[1][table] != count:
                raise StorageError(
                    f"The copy is incomplete: conversation {conversation_id} has {count} {table} rows in the source "
                    f"and {counts[1][table]} in the target. Run `ollama-mcp migrate` again; if the difference "
                    "stays, the target held other data for that conversation."
                )
            totals[table] += count
    return totals


@dataclass
class AccessReport:
    tokens: int = 0  # added to the target by this run
    shares: int = 0
    totals: dict[str, int] = field(default_factory=dict)  # what the source holds


async def copy_access(source: Storage, target: Storage) -> AccessReport:
    """Copy the HTTP server's tokens (hashes as they are, so every token keeps working) and the
    shares between principals from the local principal's store ``source`` into ``target``'s; then
    check that the target holds each as the source does (``StorageError`` on a difference)."""
    tokens = await source.token_rows()
    theirs = {token_hash: token for token, token_hash in await target.token_rows()}
    active = {token.name: token_hash for token_hash, token in theirs.items() if token.revoked_at is None}
    for token, token_hash in tokens:
        if token.revoked_at is None and active.get(token.name, token_hash) != token_hash:
            raise StorageError(
                f"The target already has an active token named {token.name!r} with another secret, so the tokens "
                "were not copied. Revoke it there (`ollama-mcp token revoke` with OLLAMA_MCP_DB naming the target) "
                "and run `ollama-mcp migrate` again."
            )
    await target.import_tokens(tokens)
    shares = await source.all_shares()
    before = set(await target.all_shares())
    for share in shares:
        if share not in before:
            await target.set_share(share)
    copied = {token_hash: token for token, token_hash in await target.token_rows()}
    for token, token_hash in tokens:
        if copied.get(token_hash) != token:
            raise StorageError(
                f"The copy differs: token {token.name!r} of principal {token.principal!r} is "
                f"{'missing' if token_hash not in copied else 'different'} in the target. Run `ollama-mcp migrate` "
                "again; if the difference stays, the target holds another state of that token."
            )
    missing = set(shares) - set(await target.all_shares())
    if missing:
        share = min(missing, key=lambda s: (s.conversation_id, s.grantee))
        raise StorageError(
            f"The copy differs: conversation {share.conversation_id}'s share with {share.grantee!r} is not in the "
            "target as in the source. Run `ollama-mcp migrate` again."
        )
    return AccessReport(
        tokens=sum(1 for _, token_hash in tokens if token_hash not in theirs),
        shares=sum(1 for share in shares if share not in before),
        totals={"tokens": len(tokens), "shares": len(shares)},
    )
