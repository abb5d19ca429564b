"""Conversations shared between the principals of an HTTP server with tokens: sharing one
(``share``), which principal's app serves a call that names a conversation (``serving``), and
the conversations shared with a caller, for list_conversations (``listed``) and
search_all_conversations (``search_all``). A server without tokens has one principal and shares
nothing: ``Solo`` answers the same questions for it, so the tools never branch on sharing.

The shares are kept in the local principal's store, as the tokens are. A conversation stays in
its owner's store, and a call of a grantee on it runs in the owner's app, acting (and audited)
as the grantee's token. ``read`` lets a grantee search it, export it, read its resource and
build its context; ``write`` lets them also store memories in it. Ending, deleting and sharing
it, and asking the agent about it, stay with its owner; so do correcting and deleting single
memories, which name no conversation. The apps come from the caller (the server's lifespan).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Literal

import anyio

from ollama_mcp.config import LOCAL_PRINCIPAL
from ollama_mcp.domain import (
    Conversation,
    ConversationQuery,
    ConversationShare,
    SearchHit,
    SearchMode,
    SearchOutcome,
    SearchRequest,
    utc_now,
)
from ollama_mcp.errors import InvalidInputError, OllamaMcpError
from ollama_mcp.folds import fold
from ollama_mcp.inputs import fields

if TYPE_CHECKING:
    from ollama_mcp.app import App
    from ollama_mcp.services.shares import ShareRegistry

Need = Literal["read", "write", "own"]


class Sharing:
    """Shares between the principals whose apps ``app_of`` opens."""

    def __init__(self, app_of: Callable[[str], Awaitable[App]]) -> None:
        self._app_of = app_of

    async def _registry(self) -> ShareRegistry:
        return (await self._app_of(LOCAL_PRINCIPAL)).shares

    async def serving(self, principal: str, conversation_id: object, need: Need, doing: str = "do that") -> str:
        """The principal whose app serves ``principal``'s call on ``conversation_id``: its owner
        when it is shared with ``principal`` for ``need``, else ``principal`` itself (whose app
        then finds it, or says it does not exist). A share that does not allow ``need`` is
        refused, naming the owner; ``doing`` says what only the owner may do."""
        try:
            key = fields.conversation_id("conversation_id", conversation_id)
        except InvalidInputError:
            return principal  # the caller's own app reports it
        share = None if key is None else await (await self._registry()).share_of(key, principal)
        if share is None:
            return principal
        if need == "read" or (need == "write" and share.access == "write"):
            return share.owner
        if need == "write":
            raise InvalidInputError(
                "conversation_id", f"{key} is {share.owner}'s, shared with you to read only",
                f"ask {share.owner} to share it with access write, or store in a conversation of your own",
            )
        raise InvalidInputError(
            "conversation_id", f"{key} is {share.owner}'s, shared with you; only its owner may {doing}",
            f"ask {share.owner}",
        )

    async def readable_beside(self, principal: str, conversation_id: str) -> tuple[str, ...] | None:
        """What ``principal`` may read in the store that holds ``conversation_id``: None (all of
        it) when that is its own store, else the conversations of that owner shared with it."""
        share = await (await self._registry()).share_of(conversation_id, principal)
        if share is None:
            return None
        return tuple((await self._by_owner(principal)).get(share.owner, {}))

    async def share(
        self, owner: str, conversation_id: object, grantee: object, access: object
    ) -> tuple[str, list[ConversationShare]]:
        """Share ``owner``'s conversation with ``grantee`` (``access`` none: stop); its id, and
        whom it is shared with afterwards."""
        key = fields.conversation_id("conversation_id", conversation_id)
        if key is None:
            raise InvalidInputError(
                "conversation_id",
                "is required",
                "pass the id of a conversation of yours (list_conversations shows them)",
            )
        to = fields.principal("principal", grantee)
        level = fields.share_access("access", access)
        if to == owner:
            raise InvalidInputError("principal", "names you", "pass the principal of the person to share it with")
        await self.serving(owner, key, "own", "share it")
        await (await self._app_of(owner)).conversations.get(key)  # the owner's, or not found
        registry = await self._registry()
        if level is None:
            await registry.withdraw(key, to)
        else:
            await registry.grant(ConversationShare(key, to, owner, level, utc_now()))
        return key, await registry.shares_of(key)

    async def forget(self, conversation_id: str) -> None:
        """A conversation its owner deleted is shared with nobody any more."""
        await (await self._registry()).forget(conversation_id)

    async def listed(
        self, principal: str, own: App, query: ConversationQuery
    ) -> list[tuple[Conversation, ConversationShare | None]]:
        """list_conversations for ``principal``: its own conversations and those shared with it
        that ``query`` selects, in the query's order, at most its limit."""
        found: list[tuple[Conversation, ConversationShare | None]] = [
            (c, None) for c in await own.conversations.listed(query)
        ]
        for owner, shares in (await self._by_owner(principal)).items():
            app = await self._app_of(owner)
            found += [(c, shares[c.id]) for c in await app.conversations.listed(replace(query, ids=tuple(shares)))]
        if query.order == "created":
            found.sort(key=lambda pair: pair[0].created_at, reverse=True)
        else:
            found.sort(key=lambda pair: pair[0].last_activity or pair[0].created_at, reverse=True)
        return found[: query.limit]

    async def _by_owner(self, principal: str) -> dict[str, dict[str, ConversationShare]]:
        by_owner: dict[str, dict[str, ConversationShare]] = {}
        for share in await (await self._registry()).shares_with(principal):
            by_owner.setdefault(share.owner, {})[share.conversation_id] = share
        return by_owner

    async def search_all(self, principal: str, own: App, request: SearchRequest) -> SearchOutcome:
        """search_all_conversations for ``principal`` in ``own`` (the app serving its call): with
        ``related_to``, in the store that holds that conversation (its owner's when shared) and
        only what the caller may read there; else everywhere it may read."""
        if request.related_to is not None:
            allowed = await self.readable_beside(principal, request.related_to)
            return await own.recall.search(
                replace(request, filters=replace(request.filters, conversation_ids=allowed))
            )
        return await self._search_everywhere(principal, own, request)

    async def _search_everywhere(self, principal: str, own: App, request: SearchRequest) -> SearchOutcome:
        """search_all_conversations for ``principal``: its own memory and the conversations shared
        with it, each owner's searched in the owner's app at once. Each ranking's order means
        something only within it, so the lists are interleaved by rank (own first at each)."""
        by_owner = await self._by_owner(principal)
        if not by_owner:
            return await own.recall.search(request)
        outcomes: list[SearchOutcome | OllamaMcpError | None] = [None] * (len(by_owner) + 1)

        async def search(slot: int, owner: str | None, asked: SearchRequest) -> None:
            try:
                app = own if owner is None else await self._app_of(owner)
                outcomes[slot] = await app.recall.search(asked)
            except OllamaMcpError as exc:  # raised below as itself, not in an ExceptionGroup
                outcomes[slot] = exc

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(search, 0, None, request)
            for slot, (owner, shares) in enumerate(by_owner.items(), start=1):
                asked = replace(request, filters=replace(request.filters, conversation_ids=tuple(shares)))
                tasks.start_soon(search, slot, owner, asked)
        done: list[SearchOutcome] = []
        for outcome in outcomes:
            if isinstance(outcome, OllamaMcpError):
                raise outcome
            assert outcome is not None
            done.append(outcome)
        hits: list[SearchHit] = []
        for rank in range(max(len(outcome.hits) for outcome in done)):
            hits += [outcome.hits[rank] for outcome in done if rank < len(outcome.hits)]
        mode: SearchMode = "hybrid" if all(o.mode == "hybrid" for o in done) else "keyword"
        if not request.query:  # a listing: newest first across every owner, as in one store
            hits.sort(key=lambda h: (h.memory.occurred_at, h.memory.created_at), reverse=True)
            mode = "list"
        # An owner whose memory held nothing says so; that is not the answer when another's holds it.
        notices = dict.fromkeys(o.notice for o in done if o.notice and (o.hits or not hits))
        shown = hits[: request.top_k] if mode == "list" else fold(hits, request.top_k)  # one hit per fact
        return SearchOutcome(shown, mode, max(o.elapsed_ms for o in done), " ".join(notices) or None, "all")


class Solo:
    """A server with one principal (stdio, or HTTP without tokens): nothing is shared, every call
    is served by the caller's own app. Answers ``Sharing``'s questions, so callers never branch."""

    async def serving(self, principal: str, conversation_id: object, need: Need, doing: str = "do that") -> str:
        return principal

    async def readable_beside(self, principal: str, conversation_id: str) -> tuple[str, ...] | None:
        return None

    async def forget(self, conversation_id: str) -> None:
        return None

    async def listed(
        self, principal: str, own: App, query: ConversationQuery
    ) -> list[tuple[Conversation, ConversationShare | None]]:
        return [(c, None) for c in await own.conversations.listed(query)]

    async def search_all(self, principal: str, own: App, request: SearchRequest) -> SearchOutcome:
        return await own.recall.search(request)
