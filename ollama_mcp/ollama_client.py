"""All HTTP to Ollama: one kept-alive client, explicit timeouts, and errors translated in one place."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import httpx
import ollama
from pydantic import ValidationError

from ollama_mcp.errors import (
    InputTooLongError,
    OllamaModelError,
    OllamaUnavailableError,
)


@dataclass(frozen=True)
class ModelInfo:
    """What ``/api/show`` says about a model that matters to us."""

    name: str
    context_length: int | None
    embedding_length: int | None
    capabilities: tuple[str, ...]


class OllamaClient:
    """Thin async wrapper over ``ollama.AsyncClient`` whose failures are always ``OllamaError``s."""

    def __init__(self, host: str, *, timeout: float, connect_timeout: float) -> None:
        self.host = host
        self.timeout = timeout
        # The ollama client's default timeout is infinite: a hung server would hang the tool call.
        self._client = ollama.AsyncClient(
            host=host, timeout=httpx.Timeout(timeout, connect=connect_timeout)
        )

    async def aclose(self) -> None:
        await self._client.close()

    async def embed(self, model: str, texts: Sequence[str]) -> list[list[float]]:
        """One vector per text. ``truncate=False``: an over-long input is an error, never cut silently."""
        with self._translate(model, "compute embeddings"):
            response = await self._client.embed(model=model, input=list(texts), truncate=False)
            vectors = [list(v) for v in response.embeddings]
        if len(vectors) != len(texts):
            raise OllamaUnavailableError(
                f"Ollama at {self.host} returned {len(vectors)} embeddings for {len(texts)} texts "
                f"with model {model!r}; the reply is unusable. Check the Ollama version."
            )
        return vectors

    async def show(self, model: str) -> ModelInfo:
        with self._translate(model, "describe the model"):
            response = await self._client.show(model)
        info = dict(response.modelinfo or {})
        arch = str(info.get("general.architecture", ""))
        return ModelInfo(
            name=model,
            context_length=_int(info.get(f"{arch}.context_length")),
            embedding_length=_int(info.get(f"{arch}.embedding_length")),
            capabilities=tuple(response.capabilities or ()),
        )

    @contextmanager
    def _translate(self, model: str, action: str) -> Iterator[None]:
        try:
            yield
        except ollama.ResponseError as exc:
            status = exc.status_code
            if status == 404:
                raise OllamaModelError(
                    f"Ollama at {self.host} does not have the model {model!r}; run `ollama pull {model}` "
                    "or set OLLAMA_MCP_EMBED_MODEL to a model you have."
                ) from exc
            if status == 400 and "context length" in (exc.error or ""):
                raise InputTooLongError(model) from exc
            if status == 400 and "does not support" in (exc.error or ""):
                raise OllamaModelError(
                    f"Ollama model {model!r} cannot {action} ({exc.error}); set OLLAMA_MCP_EMBED_MODEL to an "
                    "embedding model such as nomic-embed-text and run `ollama pull nomic-embed-text`."
                ) from exc
            raise OllamaUnavailableError(
                f"Ollama at {self.host} failed to {action} with model {model!r} "
                f"(HTTP {status}: {exc.error}). It will be retried."
            ) from exc
        except (ConnectionError, httpx.ConnectError) as exc:
            raise OllamaUnavailableError(
                f"Ollama is not reachable at {self.host}; start it (`ollama serve` or the Ollama app) "
                "or set OLLAMA_HOST to where it listens."
            ) from exc
        except httpx.TimeoutException as exc:
            raise OllamaUnavailableError(
                f"Ollama at {self.host} did not answer within {self.timeout:g} s while trying to {action} "
                f"with model {model!r}; it may be loading the model or overloaded. It will be retried "
                "(OLLAMA_MCP_EMBED_TIMEOUT sets the limit)."
            ) from exc
        except (httpx.HTTPError, ValidationError, ValueError, KeyError, TypeError) as exc:
            # A reply that is not the JSON Ollama sends (a proxy page, a truncated body, ...).
            raise OllamaUnavailableError(
                f"Ollama at {self.host} sent a reply that could not be read while trying to {action} "
                f"({type(exc).__name__}); check that OLLAMA_HOST points at Ollama. It will be retried."
            ) from exc


def _int(value: object) -> int | None:
    try:
        return int(value)  # type: ignore[call-overload]
    except (TypeError, ValueError):
        return None
