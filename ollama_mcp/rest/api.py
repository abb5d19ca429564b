"""The REST API for chat apps and agent frameworks, under ``/api/v1`` on the HTTP server
(``serve --http``), behind the same tokens and per-person memory as MCP: a token opens its
principal's store only, so another person's conversation is a 404, the same answer as a random id.

Each endpoint is a row of ``ENDPOINTS``: its method and path, the body it takes and the answer it
gives (``models``), and a thin handler over the services. The Starlette routes and the OpenAPI
document (``GET /api/v1/openapi.json``) are both made from those rows, so they cannot disagree.
Every request passes the same checks first (``RestGuard``): the Host names this server, an Origin
if sent is this server's, the token (when the server has tokens), a JSON body within
``MAX_BODY_BYTES``. Our errors are translated once (``_answer``): bad input 400 naming the field,
not found 404, an ended conversation 409, the store or Ollama unavailable 503, anything else 500
without details (they are in the server log).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ValidationError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Match, Route

from ollama_mcp import audit, caller, json_depth
from ollama_mcp.errors import (
    ConfigError,
    ConversationClosedError,
    ConversationNotFoundError,
    InvalidInputError,
    JobBusyError,
    MemoryNotFoundError,
    NotFoundError,
    OllamaError,
    OllamaMcpError,
    StorageError,
    TurnClosedError,
)
from ollama_mcp.listen import names_this_server
from ollama_mcp.rest.handlers import (
    Call,
    Handler,
    Refused,
    abort_turn,
    add_turn,
    append_to_turn,
    build_context,
    commit_turn,
    compact,
    create_conversation,
    delete_conversation,
    edit_turn,
    end_conversation,
    extract_facts,
    get_conversation,
    get_job,
    get_turn,
    list_conversations,
    list_turns,
    recall,
    regenerate_turn,
    summarize,
)
from ollama_mcp.rest.models import (
    PREFIX,
    AppendIn,
    CommitIn,
    CompactIn,
    ContextIn,
    ContextOut,
    ConversationCreated,
    ConversationDeleted,
    ConversationIn,
    ConversationList,
    ConversationOut,
    EditIn,
    EndIn,
    ErrorOut,
    FactsIn,
    JobOut,
    OpenTurnOut,
    Recalled,
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

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 4 * 2**20  # as the MCP endpoint: a turn is at most OLLAMA_MCP_MAX_CONTENT_CHARS characters
TOKEN_HELP = ("send your token as `Authorization: Bearer <token>`; the server's operator makes one with "
              "`ollama-mcp token create NAME`")

Admit = Callable[[str | None], Awaitable[tuple["App", str | None] | None]]
"""The bearer secret sent (None: none) -> the app it opens and the name its writes are audited
under, or None (refused). Made by the HTTP server from its plan (``host.http``)."""


@dataclass(frozen=True)
class Endpoint:
    method: str
    path: str  # below PREFIX, with {names} for the path's ids
    name: str  # the OpenAPI operationId
    summary: str
    body: type[BaseModel] | None
    answer: type[BaseModel]
    status: int  # what success answers (created: 201)
    handler: Handler
    query: tuple[tuple[str, str], ...] = ()  # (name, description) of the query parameters
    also: type[BaseModel] | None = None  # another answer the same success status may carry


CONVERSATION = "/conversations/{conversation_id}"
ENDPOINTS: tuple[Endpoint, ...] = (
    Endpoint("GET", "/conversations", "listConversations", "Your conversations, latest activity first.", None,
             ConversationList, 200, list_conversations, (
                 ("status", "active or completed"), ("limit", "1-500, default 20"), ("name", "part of the name"),
                 ("order", "activity (default) or created"), ("project", "a project's folder name or path"))),
    Endpoint("POST", "/conversations", "createConversation", "Start a conversation (201), or return the one "
             "with the id you minted (200).", ConversationIn, ConversationCreated, 201, create_conversation),
    Endpoint("GET", CONVERSATION, "getConversation", "One conversation.", None, ConversationOut, 200,
             get_conversation),
    Endpoint("DELETE", CONVERSATION, "deleteConversation", "Delete a conversation with everything in it.", None,
             ConversationDeleted, 200, delete_conversation),
    Endpoint("POST", CONVERSATION + "/end", "endConversation", "End it; it stays searchable.", EndIn,
             ConversationOut, 200, end_conversation),
    Endpoint("POST", CONVERSATION + "/turns", "addTurn", "Record one turn (201); the same turn sent again at once "
             'is a retry (200, duplicate). With status "open", start a streamed turn (an OpenTurnOut).', TurnIn,
             TurnAdded, 201, add_turn, also=OpenTurnOut),
    Endpoint("PATCH", "/turns/{turn_id}", "appendToTurn", "Add the next part of a streamed turn's text.", AppendIn,
             OpenTurnOut, 200, append_to_turn),
    Endpoint("POST", "/turns/{turn_id}/commit", "commitTurn", "End a streamed turn: it becomes a message with its id.",
             CommitIn, TurnOut, 200, commit_turn),
    Endpoint("GET", "/turns/{turn_id}", "getTurn", "A turn by its id: being streamed or aborted (its text so far, an "
             "OpenTurnOut), or committed (the message).", None, OpenTurnOut, 200, get_turn, also=TurnOut),
    Endpoint("POST", "/turns/{turn_id}/abort", "abortTurn", "Stop a streamed turn: kept, marked aborted.", None,
             OpenTurnOut, 200, abort_turn),
    Endpoint("PUT", "/turns/{turn_id}", "editTurn", "Edit a turn: it keeps its id and place; what it said before "
             "is kept in earlier_versions.", EditIn, TurnOut, 200, edit_turn),
    Endpoint("POST", "/turns/{turn_id}/regenerate", "regenerateTurn", "A new answer for an assistant turn, the "
             "earlier one kept in earlier_versions.", RegenerateIn, TurnOut, 200, regenerate_turn),
    Endpoint("GET", CONVERSATION + "/turns", "listTurns", "The latest turns, oldest first.", None, TurnPage, 200,
             list_turns, (("limit", "1-200, default 20"), ("before", "a turn id: the turns before it"))),
    Endpoint("POST", CONVERSATION + "/recall", "recall", "Memories and turns found for a query, best first.",
             RecallIn, Recalled, 200, recall),
    Endpoint("POST", CONVERSATION + "/context", "buildContext", "The model-ready messages: summary, recent turns "
             "and recalled memories within a token budget.", ContextIn, ContextOut, 200, build_context),
    Endpoint("POST", CONVERSATION + "/summarize", "summarize", "Summarize it now, in the background (202): "
             "its job. One already queued is returned, taking this request's options; one running with other "
             "options is a 409.", SummarizeIn, JobOut, 202, summarize),
    Endpoint("POST", CONVERSATION + "/compact", "compact", "Compact its transcript now, in the background (202).",
             CompactIn, JobOut, 202, compact),
    Endpoint("POST", CONVERSATION + "/facts", "extractFacts", "Extract its facts now, in the background (202).",
             FactsIn, JobOut, 202, extract_facts),
    Endpoint("GET", "/jobs/{job_id}", "getJob", "A job: queued, running, done or failed, and why.", None, JobOut,
             200, get_job),
)


# -- the edge: checks, the one error translation, the routes and their document -----------------


def rest_app(admit: Admit, hosts: tuple[str, ...], origins: tuple[str, ...], tokens_required: bool) -> Starlette:
    """The API as an ASGI app to mount at ``PREFIX``: ``hosts``/``origins`` as the MCP endpoint's
    (``name:*`` is any port), ``admit`` deciding who a request is for."""
    routes = [Route(e.path, _route(e, admit, hosts, origins), methods=[e.method]) for e in ENDPOINTS]
    document = openapi(tokens_required)

    async def spec(request: Request) -> Response:
        try:
            _check_site(request, hosts, origins)
        except Refused as refused:
            return _error(refused.status, str(refused), refused.field)
        return JSONResponse(document)

    routes.append(Route("/openapi.json", spec, methods=["GET"]))

    async def no_such_path(request: Request, _exc: Exception) -> Response:
        return _error(404, f"there is no {request.method} {request.url.path}; {_SEE_DOCUMENT}")

    async def wrong_method(request: Request, _exc: Exception) -> Response:
        # (Starlette's own Allow names one route's methods; a path may have a route a method)
        allowed = sorted({m for r in routes if r.matches(request.scope)[0] != Match.NONE for m in r.methods or ()})
        response = _error(405, f"{request.method} is not accepted on {request.url.path}; it takes {', '.join(allowed)}"
                               f" ({_SEE_DOCUMENT})")
        response.headers["allow"] = ", ".join(allowed)
        return response

    # A path or method the API does not have is a JSON error too (Starlette answers them in plain text).
    return Starlette(routes=routes, exception_handlers={404: no_such_path, 405: wrong_method})


_SEE_DOCUMENT = f"see GET {PREFIX}/openapi.json for the endpoints"


def _route(endpoint: Endpoint, admit: Admit, hosts: tuple[str, ...], origins: tuple[str, ...]) -> Any:
    async def handle(request: Request) -> Response:
        try:
            _check_site(request, hosts, origins)
            opened = await admit(_bearer(request))
            if opened is None:
                raise Refused(401, f"a valid token is required: {TOKEN_HELP}")
            app, actor = opened
            body = await _body(request, endpoint.body)
            call = Call(app, dict(request.path_params), dict(request.query_params), body)
            with audit.through("rest"), caller.acting(f"{caller.TOKEN}{actor or 'local'}", actor):
                status, answer = await endpoint.handler(call)
        except Exception as exc:  # noqa: BLE001 - the one translation of this edge
            return _answer(exc)
        return JSONResponse(answer.model_dump(mode="json", exclude_none=True), status_code=status)

    return handle


def _answer(exc: Exception) -> Response:
    """An error as the API says it: our own with its status and words, anything else a 500
    that names only its type (the stack goes to the server log)."""
    if isinstance(exc, Refused):
        response = _error(exc.status, str(exc), exc.field)
        if exc.status == 401:
            response.headers["www-authenticate"] = 'Bearer realm="ollama-mcp"'
        return response
    if isinstance(exc, InvalidInputError):
        return _error(400, str(exc), exc.field)
    if isinstance(exc, ConversationNotFoundError):  # in this door's words, not the MCP tools'
        return _error(404, f"conversation_id: no conversation {exc.conversation_id} exists; GET {PREFIX}/conversations "
                           f"lists the ids, and POST {PREFIX}/conversations starts one.", "conversation_id")
    if isinstance(exc, ConversationClosedError):
        return _error(409, f"conversation_id: conversation {exc.conversation_id} has ended and takes no new turns; it "
                           f"stays searchable. POST {PREFIX}/conversations starts a new one.", "conversation_id")
    if isinstance(exc, MemoryNotFoundError):
        return _error(404, f"memory_id: no memory {exc.memory_id} exists (it may have been deleted already); use an id "
                           "a turn or a recall returned.", "memory_id")
    if isinstance(exc, NotFoundError):
        return _error(404, str(exc), exc.field)
    if isinstance(exc, TurnClosedError | JobBusyError):
        return _error(409, str(exc))
    if isinstance(exc, StorageError | OllamaError | ConfigError):
        return _error(503, str(exc))
    if isinstance(exc, OllamaMcpError):
        return _error(500, str(exc))
    log.exception("internal error in a REST call", exc_info=exc)
    return _error(500, f"internal error ({type(exc).__name__}); details are in the server log")


def _error(status: int, message: str, field: str | None = None) -> JSONResponse:
    return JSONResponse(ErrorOut(error=message, field=field).model_dump(exclude_none=True), status_code=status)


def _check_site(request: Request, hosts: tuple[str, ...], origins: tuple[str, ...]) -> None:
    """Host must name this server (a DNS-rebinding page is refused before anything is read), and
    an Origin, when a browser sends one, must be this server's."""
    if not names_this_server(request.headers.get("host", "").lower(), hosts):
        raise Refused(421, "the Host header does not name this server")
    origin = request.headers.get("origin")
    if origin is not None and not names_this_server(origin.lower(), origins):
        raise Refused(403, f"requests from {origin} are not accepted; call the API from a server, not a web page")


def _bearer(request: Request) -> str | None:
    header = request.headers.get("authorization", "")
    scheme, _, secret = header.partition(" ")
    return secret.strip() or None if scheme.lower() == "bearer" else None


async def _body(request: Request, model: type[BaseModel] | None) -> Any:
    """The request's JSON body checked against ``model``; None for a request that takes none."""
    if model is None:
        return None
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > MAX_BODY_BYTES:
        raise Refused(413, f"the body is larger than {MAX_BODY_BYTES // 2**20} MiB")
    if request.headers.get("content-type", "").split(";")[0].strip().lower() != "application/json":
        raise Refused(415, "send the body as JSON, with Content-Type: application/json")
    data = b""
    async for chunk in request.stream():
        data += chunk
        if len(data) > MAX_BODY_BYTES:
            raise Refused(413, f"the body is larger than {MAX_BODY_BYTES // 2**20} MiB")
    try:
        parsed = json_depth.loads(data or b"null")
    except json_depth.TooDeep as exc:
        raise Refused(400, f"the body is {exc}; send a flatter JSON object") from None
    except ValueError as exc:
        raise Refused(400, f"the body is not JSON ({exc}); send a JSON object") from None
    if not isinstance(parsed, dict):
        raise Refused(400, "the body must be a JSON object")
    try:
        return model.model_validate(parsed)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(part) for part in first["loc"]) or None
        said = "is not a field of this request" if first["type"] == "extra_forbidden" else first["msg"].lower()
        raise Refused(400, f"{field}: {said}; see GET {PREFIX}/openapi.json for this request's fields", field) from None


def openapi(tokens_required: bool) -> dict[str, Any]:
    """The OpenAPI 3.1 document of ``ENDPOINTS``, their bodies' schemas from the same models."""
    models: dict[str, type[BaseModel]] = {"Error": ErrorOut}
    for endpoint in ENDPOINTS:
        models[endpoint.answer.__name__] = endpoint.answer
        if endpoint.also is not None:
            models[endpoint.also.__name__] = endpoint.also
        if endpoint.body is not None:
            models[endpoint.body.__name__] = endpoint.body
    schemas: dict[str, Any] = {}
    for model in models.values():
        schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
        schemas.update(schema.pop("$defs", {}))
        schemas[model.__name__] = schema
    schemas["Error"] = schemas.pop("ErrorOut")
    error = {"description": "What is wrong and how to fix it",
             "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}
    paths: dict[str, dict[str, Any]] = {}
    for e in ENDPOINTS:
        answer: dict[str, Any] = {"$ref": f"#/components/schemas/{e.answer.__name__}"}
        if e.also is not None:
            answer = {"anyOf": [answer, {"$ref": f"#/components/schemas/{e.also.__name__}"}]}
        operation: dict[str, Any] = {
            "operationId": e.name, "summary": e.summary,
            "responses": {
                str(e.status): {"description": "Done", "content": {"application/json": {"schema": answer}}},
                # every status the API answers with: a generated client must know each one
                "400": error, "401": error, "403": error, "404": error, "405": error, "409": error,
                "413": error, "415": error, "421": error, "503": error,
            },
        }
        if e.status == 201:
            operation["responses"]["200"] = {"description": "Already there: returned unchanged",
                                             "content": operation["responses"][str(e.status)]["content"]}
        parameters: list[dict[str, Any]] = [
            {"name": name, "in": "path", "required": True,
             "schema": {"type": "integer"} if name == "job_id" else {"type": "string"}}
            for name in re.findall(r"{(\w+)}", e.path)
        ]
        parameters += [{"name": n, "in": "query", "required": False, "description": d, "schema": {"type": "string"}}
                       for n, d in e.query]
        if parameters:
            operation["parameters"] = parameters
        if e.body is not None:
            operation["requestBody"] = {"required": True, "content": {"application/json": {
                "schema": {"$ref": f"#/components/schemas/{e.body.__name__}"}}}}
        paths.setdefault(PREFIX + e.path, {})[e.method.lower()] = operation
    document: dict[str, Any] = {
        "openapi": "3.1.0",
        "info": {"title": "ollama-mcp REST API", "version": "1",
                 "description": "Conversations, turns, recall and context of one person's local memory."},
        "paths": paths,
        "components": {"schemas": schemas},
    }
    if tokens_required:
        document["components"]["securitySchemes"] = {"bearer": {"type": "http", "scheme": "bearer"}}
        document["security"] = [{"bearer": []}]
    return document
