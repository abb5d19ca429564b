"""Live updates: resource subscriptions of both protocol eras (``resources/subscribe`` of 2025,
``subscriptions/listen`` of 2026), each served as watches (``live.Watches``) of the conversations
the subscribed URIs show."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

from mcp.server import MCPServer
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import NotificationOptions
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler
from mcp.shared.subscriptions import ResourcesListChanged, ResourceUpdated, ServerEvent
from mcp_types import (
    EmptyResult,
    SubscribeRequestParams,
    SubscriptionsListenRequestParams,
    SubscriptionsListenResult,
    UnsubscribeRequestParams,
)

from ollama_mcp.errors import InvalidInputError, NotFoundError
from ollama_mcp.inputs.fields import conversation_id as checked_conversation_id
from ollama_mcp.mcp.apps import Principals, caller_of, serving
from ollama_mcp.mcp.calls import prompt_errors
from ollama_mcp.mcp.live import Marked, Watch, Watches

if TYPE_CHECKING:
    from ollama_mcp.app import App

LIST_URI = "memory://conversations"
_CONVERSATION_URI = re.compile(r"memory://conversations/([^/]+)(?:/.*)?")  # a conversation, its pages, its history


def serve_live_updates(server: MCPServer, watches: Watches) -> None:
    """Serve ``resources/subscribe`` and ``resources/unsubscribe`` (2025 protocol: notifications
    on the session) and ``subscriptions/listen`` (2026: a stream per listen request), each as
    watches of the conversations the subscribed URIs show; and announce ``listChanged``."""
    lowlevel = server._lowlevel_server  # noqa: SLF001 - the SDK's documented seam for raw handlers
    legacy: dict[tuple[object, str], Watch] = {}  # (client connection, uri) -> its watch

    async def subscribe(ctx: ServerRequestContext[Any, Any], params: SubscribeRequestParams) -> EmptyResult:
        uri, session = str(params.uri), ctx.session
        for key in [k for k, w in legacy.items() if w not in watches]:  # dropped: its client went away
            del legacy[key]
        if (_connection_of(session), uri) in legacy:
            return EmptyResult()
        with prompt_errors():
            app, conversation = await _watch_target(cast(Principals, ctx.lifespan_context), uri, "uri")

            async def send(target: str | None) -> None:
                if target is None:
                    await session.send_resource_list_changed()
                await session.send_resource_updated(uri)

            watch = Watch(app.changes, frozenset([conversation] if conversation else []), conversation is None, send)
            await watches.add(watch)
        legacy[(_connection_of(session), uri)] = watch
        return EmptyResult()

    async def unsubscribe(ctx: ServerRequestContext[Any, Any], params: UnsubscribeRequestParams) -> EmptyResult:
        watch = legacy.pop((_connection_of(ctx.session), str(params.uri)), None)
        if watch is not None:
            watches.remove(watch)
        return EmptyResult()

    async def listen(
        ctx: ServerRequestContext[Any, Any], params: SubscriptionsListenRequestParams
    ) -> SubscriptionsListenResult:
        principals = cast(Principals, ctx.lifespan_context)
        wanted = params.notifications
        uris = list(wanted.resource_subscriptions or ())
        bus = _StreamBus()
        uris_of: dict[str | None, list[str]] = {}  # a conversation (None: the list) -> the URIs showing it
        ids_of: dict[Marked, set[str]] = {}  # the watched conversations, by the memory holding them
        listing: set[Marked] = set()  # those whose conversation list is watched
        added: list[Watch] = []
        try:
            with prompt_errors():
                for i, uri in enumerate(uris):
                    app, conversation = await _watch_target(
                        principals, uri, f"notifications.resourceSubscriptions[{i}]"
                    )
                    uris_of.setdefault(conversation, []).append(uri)
                    ids = ids_of.setdefault(app.changes, set())
                    if conversation is None:
                        listing.add(app.changes)
                    else:
                        ids.add(conversation)
                if wanted.resources_list_changed:
                    own = await principals.holder(caller_of(None, principals.default_principal).principal).app()
                    ids_of.setdefault(own.changes, set())
                    listing.add(own.changes)

                async def send(target: str | None) -> None:
                    for uri in uris_of.get(target, ()):
                        await bus.publish(ResourceUpdated(uri=uri))
                    if target is None and wanted.resources_list_changed:
                        await bus.publish(ResourcesListChanged())

                for source, ids in ids_of.items():
                    watch = Watch(source, frozenset(ids), source in listing, send)
                    await watches.add(watch)
                    added.append(watch)
            return await ListenHandler(bus)(ctx, params)
        finally:
            for watch in added:
                watches.remove(watch)

    lowlevel.add_request_handler("resources/subscribe", SubscribeRequestParams, subscribe)
    lowlevel.add_request_handler("resources/unsubscribe", UnsubscribeRequestParams, unsubscribe)
    lowlevel.add_request_handler("subscriptions/listen", SubscriptionsListenRequestParams, listen)
    # The 2025 handshake announces resources' listChanged only when told to; every transport
    # (stdio, HTTP, the in-memory client) builds its options through this method.
    plain_options = lowlevel.create_initialization_options

    def announce_list_changed(
        notification_options: NotificationOptions | None = None, *args: Any, **kwargs: Any
    ) -> Any:
        return plain_options(notification_options or NotificationOptions(resources_changed=True), *args, **kwargs)

    lowlevel.create_initialization_options = announce_list_changed  # type: ignore[method-assign]


def _connection_of(session: Any) -> object:
    """The client connection a request's session belongs to: the SDK makes a session per request
    (its notifications without a request id go out on the connection's own channel)."""
    return getattr(session, "_connection", session)


async def _watch_target(principals: Principals, uri: str, field: str) -> tuple[App, str | None]:
    """The app whose store holds what ``uri`` shows and its conversation (None: the list), once
    the caller may read it: a subscription to what one may not read, or what does not exist, is
    refused as a read would be."""
    principal = caller_of(None, principals.default_principal).principal
    if uri == LIST_URI:
        return await principals.holder(principal).app(), None
    match = _CONVERSATION_URI.fullmatch(uri)
    if match is None:
        raise InvalidInputError(
            field, f"is {uri!r}, which this server does not serve",
            f"subscribe to {LIST_URI} (the list) or {LIST_URI}/{{conversation_id}}",
        )
    conversation = checked_conversation_id(field, match[1])
    assert conversation is not None, "the pattern matched a non-empty id"
    try:
        app = await serving(principals, principal, conversation, "read", "subscribe to it")
        await app.conversations.get(conversation)
    except NotFoundError:
        raise InvalidInputError(
            field, f"names no conversation that exists ({conversation})", "call list_conversations to see the ids"
        ) from None
    return app, conversation


class _StreamBus(InMemorySubscriptionBus):
    """One listen stream's bus: what is published before the SDK's handler subscribes to it
    (between the watch's first read and the acknowledgement) is kept and handed over then."""

    def __init__(self) -> None:
        super().__init__()
        self._early: list[ServerEvent] | None = []

    async def publish(self, event: ServerEvent) -> None:
        if self._early is not None:
            self._early.append(event)
            return
        await super().publish(event)

    def subscribe(self, listener: Callable[[ServerEvent], None]) -> Callable[[], None]:
        unsubscribe = super().subscribe(listener)
        early, self._early = self._early or [], None
        for event in early:
            listener(event)
        return unsubscribe
