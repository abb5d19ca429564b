"""The REST API's handlers, one an endpoint (``api.ENDPOINTS`` routes them): each builds its
request's value with the same builder the MCP tool uses (``inputs/``: two spellings of one value),
makes one service call and shapes the answer (``models``)."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from ollama_mcp.domain import Memory
from ollama_mcp.errors import (
    InvalidInputError,
)
from ollama_mcp.inputs import fields
from ollama_mcp.inputs.context import context_request, history_request, job_id, work_request
from ollama_mcp.inputs.conversations import conversation_query, new_conversation
from ollama_mcp.inputs.search import search_request
from ollama_mcp.inputs.turns import produced_of, turn, turn_to_open
from ollama_mcp.rest.models import (
    PREFIX,
    AppendIn,
    CommitIn,
    CompactIn,
    ContextIn,
    ContextMessage,
    ContextOut,
    ConversationCreated,
    ConversationDeleted,
    ConversationIn,
    ConversationList,
    ConversationOut,
    EditIn,
    EndIn,
    FactsIn,
    JobOut,
    OpenTurnOut,
    Recalled,
    RecallHit,
    RecallIn,
    RegenerateIn,
    SummarizeIn,
    TurnAdded,
    TurnIn,
    TurnOut,
    TurnPage,
)

if TYPE_CHECKING:
    from ollama_mcp.app import App

class Refused(Exception):
    """A request answered before any handler: its status and what to do."""

    def __init__(self, status: int, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.status, self.field = status, field


@dataclass(frozen=True)
class Call:
    """What a handler gets: the app of the caller's principal, the path's ids, the query string
    and the checked body."""

    app: App
    path: dict[str, str]
    query: dict[str, str]
    body: Any


Handler = Callable[[Call], Awaitable[tuple[int, BaseModel]]]


# -- handlers: one service call each --------------------------------------------------------------


async def list_conversations(call: Call) -> tuple[int, BaseModel]:
    q = call.query
    query = conversation_query(
        q.get("status"), _whole(q, "limit", 20), q.get("name"), None, q.get("order", "activity"), q.get("project")
    )
    found = await call.app.conversations.listed(query)
    return 200, ConversationList(conversations=[ConversationOut.of(c) for c in found])


async def create_conversation(call: Call) -> tuple[int, BaseModel]:
    body: ConversationIn = call.body
    new = new_conversation(body.name, body.metadata, body.follows, body.id)
    conversation, created = await call.app.conversations.create(new)
    return (201 if created else 200), ConversationCreated(**ConversationOut.of(conversation).model_dump(),
                                                          created=created)


async def get_conversation(call: Call) -> tuple[int, BaseModel]:
    return 200, ConversationOut.of(await call.app.conversations.get(_id(call)))


async def delete_conversation(call: Call) -> tuple[int, BaseModel]:
    deleted = await call.app.conversations.delete(_id(call))
    return 200, ConversationDeleted(id=deleted.conversation.id, memories_deleted=deleted.memories)


async def end_conversation(call: Call) -> tuple[int, BaseModel]:
    body: EndIn = call.body
    summary = None if body.summary is None else fields.text(
        "summary", body.summary, call.app.settings.max_content_chars, what="summary"
    )
    ended = await call.app.conversations.end(_id(call), summary)
    return 200, ConversationOut.of(ended.conversation)


async def add_turn(call: Call) -> tuple[int, BaseModel]:
    body: TurnIn = call.body
    if body.status == "open":
        started = turn_to_open(body.model_dump(exclude_none=True, exclude={"status"}), _chars(call))
        opened = await call.app.streamed_turns.open(_id(call), started)
        return 201, OpenTurnOut.of(opened)
    added, retry = await call.app.transcript.add_turn(_id(call), turn(body.model_dump(exclude_none=True), _chars(call)))
    return (200 if retry else 201), TurnAdded(**TurnOut.of(added).model_dump(), duplicate=retry)


async def append_to_turn(call: Call) -> tuple[int, BaseModel]:
    body: AppendIn = call.body
    return 200, OpenTurnOut.of(await call.app.streamed_turns.append(_turn_id(call), body.append))


async def commit_turn(call: Call) -> tuple[int, BaseModel]:
    body: CommitIn = call.body
    # Checked with the whole turn, whose text is known only now (StreamedTurns.commit).
    committed = await call.app.streamed_turns.commit(_turn_id(call), body.model_dump(exclude_none=True))
    return 200, TurnOut.of(committed)


async def edit_turn(call: Call) -> tuple[int, BaseModel]:
    body: EditIn = call.body
    text = fields.text("content", body.content, _chars(call), what="message text")
    return 200, TurnOut.of(await call.app.transcript.revise_turn(_turn_id(call), text))


async def regenerate_turn(call: Call) -> tuple[int, BaseModel]:
    body: RegenerateIn = call.body
    text = fields.text("content", body.content, _chars(call), what="message text")
    model = dict(produced_of("", {} if body.model is None else {"model": body.model})).get("model")
    revised = await call.app.transcript.revise_turn(_turn_id(call), text, regenerated=True, model=model)
    return 200, TurnOut.of(revised)


async def get_turn(call: Call) -> tuple[int, BaseModel]:
    found = await call.app.streamed_turns.read(_turn_id(call))
    return 200, TurnOut.of(found) if isinstance(found, Memory) else OpenTurnOut.of(found)


async def abort_turn(call: Call) -> tuple[int, BaseModel]:
    return 200, OpenTurnOut.of(await call.app.streamed_turns.abort(_turn_id(call)))


async def list_turns(call: Call) -> tuple[int, BaseModel]:
    q = call.query
    asked = history_request(_id(call), _whole(q, "limit", 20), q.get("before"))
    _, turns, earlier = await call.app.transcript.history_page(asked)
    return 200, TurnPage(turns=[TurnOut.of(m) for m in turns], earlier=earlier)


async def recall(call: Call) -> tuple[int, BaseModel]:
    body: RecallIn = call.body
    target = _id(call)
    await call.app.conversations.get(target)  # a conversation that is not the caller's: 404
    request = search_request(
        body.query, target, body.k, body.threshold, kinds=body.kinds, everywhere=body.scope == "all",
        include_superseded=body.include_superseded,
    )
    outcome = await call.app.recall.search(request)
    return 200, Recalled(hits=[RecallHit.of(h) for h in outcome.hits], mode=outcome.mode, notice=outcome.notice)


async def build_context(call: Call) -> tuple[int, BaseModel]:
    body: ContextIn = call.body
    recall = body.semantic_recall
    built = await call.app.context.build(context_request(
        _id(call), body.token_budget, body.recent_turns, 5 if recall is None else recall.k, body.query,
        body.participants, body.include_facts, recall_threshold=None if recall is None else recall.threshold,
    ))
    return 200, ContextOut(
        messages=[ContextMessage(**m) for m in built.messages], tokens=built.tokens,
        summary_included=built.summary_included, recalled=[m.id for m in built.recalled],
    )


async def summarize(call: Call) -> tuple[int, BaseModel]:
    body: SummarizeIn = call.body
    return 202, JobOut.of(await call.app.work.request(work_request(_id(call), "summarize", body.through)))


async def compact(call: Call) -> tuple[int, BaseModel]:
    body: CompactIn = call.body
    job = await call.app.work.request(work_request(_id(call), "compact", body.through, body.strategy))
    return 202, JobOut.of(job)


async def extract_facts(call: Call) -> tuple[int, BaseModel]:
    body: FactsIn = call.body
    return 202, JobOut.of(await call.app.work.request(work_request(_id(call), "facts", body.through)))


async def get_job(call: Call) -> tuple[int, BaseModel]:
    raw = call.path["job_id"]
    return 200, JobOut.of(await call.app.work.job(job_id(int(raw) if WHOLE.fullmatch(raw) and raw[0] != "-" else raw)))


def _whole(query: dict[str, str], name: str, default: int) -> object:
    """A query parameter that is a whole number, as a number; anything else as sent, for the
    request's own check to refuse naming it."""
    value = query.get(name)
    if value is None:
        return default
    return int(value) if WHOLE.fullmatch(value.strip()) else value


# A whole number as a query or path parameter: ASCII digits only (str.isdigit takes "²", which
# int() refuses) and at most 18 of them (every backend's integer; a larger one names nothing).
WHOLE = re.compile(r"-?[0-9]{1,18}")


def _chars(call: Call) -> int:
    """The longest text a turn or a memory may hold on this server."""
    return call.app.settings.max_content_chars


def _turn_id(call: Call) -> str:
    """The path's turn id, checked."""
    return fields.memory_id("turn_id", call.path["turn_id"])


def _id(call: Call) -> str:
    """The path's conversation id, checked (a malformed one is a 404, as an unknown one)."""
    try:
        found = fields.conversation_id("conversation_id", call.path["conversation_id"])
    except InvalidInputError:
        found = None
    if found is None:
        raise Refused(404, f"no conversation {call.path['conversation_id']!r} here; list yours at "
                           f"GET {PREFIX}/conversations", "conversation_id")
    return found
