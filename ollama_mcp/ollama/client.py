"""All HTTP to Ollama: one kept-alive client, explicit timeouts, and errors translated in one place."""

from __future__ import annotations

import difflib
import importlib
import logging
import os
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio
from pydantic import ValidationError

from ollama_mcp.errors import (
    InputTooLongError,
    OllamaError,
    OllamaModelError,
    OllamaUnavailableError,
    OllamaUnreachableError,
)
from ollama_mcp.ollama.json_http import BrokenReply, JsonHttp, StatusError, parse_host, usable_for
from ollama_mcp.ollama.tool_text import calls_in_text

if TYPE_CHECKING:
    import ollama

log = logging.getLogger(__name__)

# ``ollama`` and ``httpx``, once this process has finished importing them (``_library``). Never
# read them from ``sys.modules``: a module another thread is importing is there half-initialised.
_LOADED: tuple[Any, Any] | None = None


async def _library() -> tuple[Any, Any]:
    """``ollama`` and ``httpx``, imported on a worker thread the first time (~200 ms): the event
    loop keeps serving meanwhile. Two tasks asking at once both wait for the one import (Python's
    per-module import lock), and each gets the finished modules."""
    global _LOADED  # noqa: PLW0603  (set once per process, after the import completed)
    if _LOADED is None:
        lib = await anyio.to_thread.run_sync(importlib.import_module, "ollama")
        _LOADED = (lib, importlib.import_module("httpx"))  # imported by ollama already: no cost
    return _LOADED


@dataclass(frozen=True)
class ModelInfo:
    """What ``/api/show`` says about a model that matters to us."""

    name: str
    context_length: int | None
    embedding_length: int | None
    capabilities: tuple[str, ...]


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True)
class ChatReply:
    content: str
    tool_calls: tuple[ToolCall, ...] = field(default_factory=tuple)
    cut: bool = False  # the model was stopped by num_predict: the text ends mid-way


# Every chat call decodes greedily (temperature 0) with no repeat penalty: Ollama's usual 1.1
# penalizes the braces and quotes a tool call or a JSON reply repeats, and Qwen2.5-Coder 1.5B then
# called no tool at all (0 of 5; 5 of 5 without it, #84). What ends a model that loops is
# ``num_predict``, which each caller sets to what its reply can need. A list under a schema may ask
# for a penalty (``repeat_penalty``): there the grammar holds the JSON's shape, and without one a
# greedy 1.5B lists one fact again and again until its cap (#84).
SAMPLING = {"temperature": 0.0, "repeat_penalty": 1.0}


class OllamaClient:
    """Thin async wrapper over ``ollama.AsyncClient`` whose failures are always ``OllamaError``s.

    The calls a user waits on, embeddings and the model's description, go through ``json_http``
    instead where it can reach the host (plain HTTP, no proxy): 2.4 ms less a call, and no import
    of the ``ollama`` client on the way to the first search (see there). ``lean=False`` keeps every
    call on the ``ollama`` client.

    ``model_setting`` and ``timeout_setting`` name the variables a user changes to fix a missing
    model or a timeout: one client embeds, another (with a longer timeout) chats.
    """

    def __init__(
        self, host: str, *, timeout: float, connect_timeout: float,
        model_setting: str = "OLLAMA_MCP_EMBED_MODEL", timeout_setting: str = "OLLAMA_MCP_EMBED_TIMEOUT",
        keep_alive: str | None = None, lean: bool = True,
    ) -> None:
        self.host = host
        self.timeout = timeout
        self.keep_alive = keep_alive  # how long Ollama keeps the model loaded (None: Ollama's default)
        self._model_setting = model_setting
        self._timeout_setting = timeout_setting
        self._connect_timeout = connect_timeout
        self._made: ollama.AsyncClient | None = None
        base = parse_host(host)
        api_key = os.environ.get("OLLAMA_API_KEY")  # as the ollama client sends it
        self._lean = JsonHttp(
            base, connect_timeout=connect_timeout, headers={"Authorization": f"Bearer {api_key}"} if api_key else None,
        ) if lean and usable_for(base) else None

    async def _client(self) -> ollama.AsyncClient:
        """The ollama client, made on first use: importing ``ollama`` takes ~200 ms, which a
        process that only embeds (the lean client does that), a Claude Code hook or a CLI command
        does not pay. The import runs in a worker thread, so the event loop keeps serving meanwhile."""
        if self._made is None:
            lib, httpx = await _library()
            # The ollama client's default timeout is infinite: a hung server would hang the tool call.
            # A plain-HTTP host (a local Ollama) never does TLS, so the CA bundle httpx loads for
            # every client by default (34 ms each) is skipped.
            plain_http = not self.host.lower().startswith("https://")
            self._made = lib.AsyncClient(
                host=self.host, timeout=httpx.Timeout(self.timeout, connect=self._connect_timeout),
                **({"verify": False, "follow_redirects": False} if plain_http else {}),
            )
        return self._made

    async def aclose(self) -> None:
        if self._lean is not None:
            await self._lean.aclose()
        if self._made is not None:
            await self._made.close()  # type: ignore[no-untyped-call]

    async def embed(self, model: str, texts: Sequence[str]) -> list[list[float]]:
        """One vector per text. ``truncate=False``: an over-long input is an error, never cut silently.

        A kept-alive connection the server closed before answering (Ollama closes idle ones) is
        tried once more on a new connection: an embedding request changes nothing, so a repeat is safe.
        """
        if self._lean is not None:  # (it asks again itself, see json_http)
            async with self._translate(model, "compute embeddings"):
                vectors = _vectors(await self._lean.request("POST", "/api/embed", {
                    "model": model, "input": list(texts), "truncate": False,
                    **({"keep_alive": self.keep_alive} if self.keep_alive is not None else {}),
                }))
        else:
            try:
                response = await self._embed_once(model, texts)
            except OllamaUnavailableError as exc:
                if type(exc.__cause__).__name__ != "RemoteProtocolError":  # httpx's
                    raise
                log.debug("Ollama closed the connection before answering; asking again")
                response = await self._embed_once(model, texts)
            vectors = [list(v) for v in response.embeddings]
        if len(vectors) != len(texts):
            raise OllamaUnavailableError(
                f"Ollama at {self.host} returned {len(vectors)} embeddings for {len(texts)} texts "
                f"with model {model!r}; the reply is unusable. Check the Ollama version."
            )
        return vectors

    async def _embed_once(self, model: str, texts: Sequence[str]) -> ollama.EmbedResponse:
        async with self._translate(model, "compute embeddings"):
            client = await self._client()
            return await client.embed(model=model, input=list(texts), truncate=False, keep_alive=self.keep_alive)

    async def chat(
        self,
        model: str,
        messages: Sequence[Mapping[str, Any]],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        schema: Mapping[str, Any] | None = None,
        num_ctx: int | None = None,
        num_predict: int | None = None,
        repeat_penalty: float | None = None,
    ) -> ChatReply:
        """One non-streamed chat turn; ``schema`` constrains the reply to JSON of that shape, and
        ``num_predict`` caps the tokens it may take (``cut`` says it was stopped there);
        ``repeat_penalty`` replaces SAMPLING's 1.0 (for a schema's reply, never with tools). Offered
        ``tools``, a reply whose whole text is a tool call is that call (``tool_text``; a name
        that is no tool is the caller's to refuse)."""
        options: dict[str, Any] = dict(SAMPLING)
        if num_ctx:
            options["num_ctx"] = num_ctx  # Ollama's default context cuts long prompts silently
        if num_predict:
            options["num_predict"] = num_predict
        if repeat_penalty:
            options["repeat_penalty"] = repeat_penalty
        async with self._translate(model, "chat"):
            client = await self._client()
            response = await client.chat(
                model=model, messages=list(messages), tools=list(tools) if tools else None,
                format=dict(schema) if schema else None, options=options, stream=False,
            )
            message = response.message
            calls = tuple(
                ToolCall(str(call.function.name), dict(call.function.arguments or {}))
                for call in (message.tool_calls or ())
            )
        content = message.content or ""
        if tools and not calls and (written := calls_in_text(content)):
            calls, content = tuple(ToolCall(name, arguments) for name, arguments in written), ""
        return ChatReply(content, calls, cut=response.done_reason == "length")

    async def show(self, model: str) -> ModelInfo:
        async with self._translate(model, "describe the model"):
            if self._lean is not None:
                reply = await self._lean.request("POST", "/api/show", {"model": model})
                info, capabilities = dict(reply["model_info"] or {}), reply.get("capabilities")
                if not isinstance(capabilities, list | None):
                    raise TypeError("capabilities")
            else:
                response = await (await self._client()).show(model)
                info, capabilities = dict(response.modelinfo or {}), response.capabilities
        arch = str(info.get("general.architecture", ""))
        return ModelInfo(
            name=model,
            context_length=_int(info.get(f"{arch}.context_length")),
            embedding_length=_int(info.get(f"{arch}.embedding_length")),
            capabilities=tuple(str(c) for c in capabilities or ()),
        )

    async def missing_model(self, model: str, setting: str | None = None) -> str:
        """What to tell a user whose model Ollama does not have: the closest pulled model of the
        right kind when there is one (a typo: `ollama pull nomic-embed-txt` would only fail),
        else the pull to run and what is pulled."""
        setting = setting or self._model_setting
        kind = "embedding" if "EMBED" in setting else "completion"
        pulled, closest = await self._closest_pulled(model, kind)
        missing = f"Ollama at {self.host} does not have the model {model!r}"
        if closest is not None:
            return f"{missing}; you have pulled {closest!r}, which is close: set {setting}={closest}."
        have = f" (pulled: {', '.join(pulled[:6])})" if pulled else ""
        return f"{missing}; run `ollama pull {model}`, or set {setting} to a model you have{have}."

    async def _closest_pulled(self, model: str, kind: str) -> tuple[list[str], str | None]:
        """The pulled models' names, and the one nearest to ``model`` that has ``kind`` (Ollama's
        capability: embedding or completion). Best effort: ([], None) when Ollama cannot say."""
        client = await self._client()
        import httpx  # noqa: PLC0415  (imported by now: see _client)
        import ollama  # noqa: PLC0415

        try:
            with anyio.fail_after(min(self.timeout, 5.0)):
                listed = await client.list()
                pulled = [str(m.model).removesuffix(":latest") for m in listed.models if m.model]
                wanted = model.removesuffix(":latest")
                for name in _near(wanted, pulled):
                    if kind in ((await client.show(name)).capabilities or ()):
                        return pulled, name
                return pulled, None
        except (ollama.ResponseError, httpx.HTTPError, ConnectionError, TimeoutError, ValidationError):
            return [], None

    @asynccontextmanager
    async def _translate(self, model: str, action: str) -> AsyncIterator[None]:
        """Errors translated once, and the timeout bounding the whole request: httpx's timeouts
        bound each read, so a server sending a byte at a time would otherwise never time out."""
        try:
            with anyio.fail_after(self.timeout):
                yield
        except OllamaError:
            raise
        except Exception as exc:
            raise await self._translated(exc, model, action) from exc

    async def _translated(self, exc: Exception, model: str, action: str) -> OllamaError:
        """The ``OllamaError`` for a failure of either client (json_http's or the ``ollama`` one).
        The ``ollama`` client's types are looked at only once this process finished importing it
        (``_library``): a failure of the lean client imports nothing, and one that happens while
        another task's import is still running (a half-initialised ``ollama`` in ``sys.modules``,
        without ``ResponseError`` yet) cannot have come from that client."""
        lib, httpx = _LOADED if _LOADED is not None else (None, None)
        status: tuple[int, str] | None = None
        if isinstance(exc, StatusError):
            status = exc.status, exc.error
        elif lib is not None and isinstance(exc, lib.ResponseError):
            status = exc.status_code, exc.error or ""
        if status is not None:
            return await self._status_error(*status, model, action)
        if isinstance(exc, ConnectionError) or (httpx is not None and isinstance(exc, httpx.ConnectError)):
            return OllamaUnreachableError(
                f"Ollama is not reachable at {self.host}; start it (`ollama serve` or the Ollama app) "
                "or set OLLAMA_HOST to where it listens."
            )
        if isinstance(exc, TimeoutError) or (httpx is not None and isinstance(exc, httpx.TimeoutException)):
            return OllamaUnavailableError(
                f"Ollama at {self.host} did not answer within {self.timeout:g} s while trying to {action} "
                f"with model {model!r}; it may be loading the model or overloaded. It will be retried "
                f"({self._timeout_setting} sets the limit)."
            )
        if isinstance(exc, BrokenReply | ValidationError | ValueError | KeyError | TypeError) or (
            httpx is not None and isinstance(exc, httpx.HTTPError)
        ):
            # A reply that is not the JSON Ollama sends (a proxy page, a truncated body, ...).
            return OllamaUnavailableError(
                f"Ollama at {self.host} sent a reply that could not be read while trying to {action} "
                f"({type(exc).__name__}); check that OLLAMA_HOST points at Ollama. It will be retried."
            )
        raise exc

    async def _status_error(self, status: int, error: str, model: str, action: str) -> OllamaError:
        if status == 404:
            return OllamaModelError(await self.missing_model(model))
        if 300 <= status < 400:
            return OllamaUnavailableError(
                f"Ollama at {self.host} answered with a redirect (HTTP {status}), which is not followed "
                "from a plain-HTTP address; set OLLAMA_HOST to the address it redirects to "
                "(https://... for HTTPS)."
            )
        if status == 400 and "context length" in error:
            return InputTooLongError(model)
        if status == 400 and "does not support tools" in error:
            return OllamaModelError(
                f"Ollama model {model!r} cannot call tools; set {self._model_setting} to a tool-capable "
                "model such as qwen2.5:3b and run `ollama pull qwen2.5:3b`."
            )
        if status == 400 and "does not support" in error:
            example = "nomic-embed-text" if action == "compute embeddings" else "qwen2.5:3b"
            return OllamaModelError(
                f"Ollama model {model!r} cannot {action} (Ollama says the model does not support it); set "
                f"{self._model_setting} to a model that can, such as {example}, and run `ollama pull {example}`."
            )
        # The body is not quoted: Ollama, or a proxy before it, may echo the text it was sent
        # (a memory, a query), and this message reaches logs and clients. It is logged at DEBUG.
        log.debug("Ollama's error body (HTTP %s) while trying to %s: %r", status, action, error)
        return OllamaUnavailableError(
            f"Ollama at {self.host} failed to {action} with model {model!r} (HTTP {status}, an error "
            f"of {len(error)} characters; OLLAMA_MCP_LOG_LEVEL=DEBUG logs it). It will be retried."
        )


def _vectors(reply: Any) -> list[list[float]]:
    """``/api/embed``'s vectors, checked to be lists of numbers (what the ollama client's
    pydantic model checks)."""
    vectors = reply["embeddings"]
    if not isinstance(vectors, list) or not all(isinstance(v, list) for v in vectors):
        raise TypeError("embeddings")
    for vector in vectors:
        sum(vector)  # a TypeError for anything but numbers (in C: 3 us a vector, not 200 in a loop)
    return vectors


def _near(wanted: str, pulled: Sequence[str]) -> list[str]:
    """Pulled names a user may have meant: the same model with another tag or suffix
    (qwen2.5:3b for qwen2.5:3b-instruct), then near spellings (nomic-embed-txt)."""
    related = [
        name for name in pulled
        if name.startswith(wanted) or wanted.startswith(name) or name.split(":")[0] == wanted.split(":")[0]
    ]
    similar = difflib.get_close_matches(wanted, pulled, n=3, cutoff=0.75)
    return [name for name in dict.fromkeys([*related, *similar]) if name != wanted][:4]


def _int(value: object) -> int | None:
    try:
        return int(value)  # type: ignore[call-overload,no-any-return]
    except (TypeError, ValueError):
        return None
