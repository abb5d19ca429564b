"""A fake Ollama HTTP server speaking the real wire format, for the real ``ollama`` client.

It runs on a loopback port in a thread (so subprocess tests can use it too) and can be stopped
and restarted on the same port (Ollama down / back), made slow, made to answer 404 for a model,
to change a model's dimension, or to send malformed JSON.

Embeddings are deterministic bags of words: each word (after a known task prefix is removed)
adds +1 on its own axis (words get axes in the order the fake first sees them, so two words
share an axis only past ``dim`` distinct words), and texts sharing words are similar. ``concepts``
maps words onto a shared axis, so a test can make "car" and "automobile" mean the same thing
while sharing no keyword.
"""

from __future__ import annotations

import json
import re
import socket
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np

PREFIXES = ("search_document: ", "search_query: ")
CHUNKING_BYTES = 2048  # Go's net/http: a reply longer than this, written without a length, is chunked
_WORD = re.compile(r"\w+")


@dataclass
class FakeModel:
    dim: int = 256
    context: int = 2048  # in "tokens": the fake counts one token per word
    capabilities: list[str] = field(default_factory=lambda: ["embedding"])
    family: str = "nomic-bert"


@dataclass
class Request:
    method: str
    path: str
    body: dict[str, Any]


class FakeOllama:
    def __init__(self) -> None:
        self.models: dict[str, FakeModel] = {
            "nomic-embed-text": FakeModel(),
            "qwen2.5:3b": FakeModel(capabilities=["completion", "tools"], family="qwen2"),
        }
        self.concepts: dict[str, str] = {}
        self.requests: list[Request] = []
        self.delay = 0.0
        self.delay_per_text = 0.0  # an embedding's cost per input text, as on a CPU
        self.malformed = False
        self.trickle = 0.0  # > 0: send each reply's body one byte at a time, this many seconds apart
        self.fail: tuple[int, str] | None = None  # (status, error text) for every request
        self.hang_up = 0  # close this many embed requests' connections without an answer
        # Scripted chat replies, used in order: a message dict ({"role": "assistant", "content": ...,
        # "tool_calls": [...]}), optionally with "_delay" (seconds to wait first), "_status"
        # ((code, error text) to fail with) or "_done_reason" ("length": cut by num_predict). With
        # none queued: a JSON summary when a format is asked for, else "ok". ask_agent's settling
        # call echoes the model's answer unless the reply queued first is marked "_settle": True.
        self.chat_replies: list[dict[str, Any]] = []
        self.chat_delay = 0.0
        self.port = 0
        self.accepted = 0  # connections made to the fake
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._connections: set[socket.socket] = set()
        self._axes: dict[str, int] = {}

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> FakeOllama:
        fake = self

        class Handler(_Handler):
            owner = fake

        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.02,), daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Close the port: clients get 'connection refused', as when Ollama is not running."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        with self._lock:  # kept-alive connections too, or the client would still get answers
            for connection in self._connections:
                try:
                    connection.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
            self._connections.clear()

    def embed_requests(self) -> list[Request]:
        with self._lock:
            return [r for r in self.requests if r.path == "/api/embed"]

    def chat_requests(self) -> list[Request]:
        """The chat requests, less ask_agent's settling calls (``settle_requests``)."""
        with self._lock:
            return [r for r in self.requests if r.path == "/api/chat" and not _settling(r.body)]

    def settle_requests(self) -> list[Request]:
        """ask_agent's last call of a run, which settles the model's answer (settling.FINAL_SCHEMA)."""
        with self._lock:
            return [r for r in self.requests if r.path == "/api/chat" and _settling(r.body)]

    def enqueue_chat(self, *replies: dict[str, Any] | str) -> None:
        """Queue replies: a string is an assistant message with that content."""
        with self._lock:
            self.chat_replies.extend(
                {"role": "assistant", "content": r} if isinstance(r, str) else r for r in replies
            )

    def vector(self, model: str, text: str) -> list[float]:
        spec = self.models[model]
        for prefix in PREFIXES:
            if text.startswith(prefix):
                text = text[len(prefix):]
        v = np.zeros(spec.dim, dtype=np.float64)
        for word in _WORD.findall(text.lower()):
            key = self.concepts.get(word, word)
            with self._lock:
                axis = self._axes.setdefault(key, len(self._axes))
            v[axis % spec.dim] += 1.0
        if not v.any():
            v[0] = 1.0
        return (v / np.linalg.norm(v)).tolist()

    # -- request handling (runs in the server's threads) ----------------------------------------

    def handle(self, method: str, path: str, body: dict[str, Any]) -> tuple[int, Any]:
        with self._lock:
            self.requests.append(Request(method, path, body))
        if self.delay:
            time.sleep(self.delay)
        if self.fail is not None:
            return self.fail[0], {"error": self.fail[1]}
        if method == "GET" and path == "/api/version":
            return 200, {"version": "0.12.0"}
        if method == "GET" and path == "/api/tags":
            return 200, {"models": [_tag(name, spec) for name, spec in self.models.items()]}
        if method == "POST" and path == "/api/show":
            return self._show(body)
        if method == "POST" and path == "/api/embed":
            return self._embed(body)
        if method == "POST" and path == "/api/chat":
            return self._chat(body)
        return 404, {"error": "404 page not found"}

    def _model(self, body: dict[str, Any]) -> tuple[str, FakeModel | None]:
        name = str(body.get("model", ""))
        return name, self.models.get(name) or self.models.get(name.removesuffix(":latest"))

    def _show(self, body: dict[str, Any]) -> tuple[int, Any]:
        name, spec = self._model(body)
        if spec is None:
            return 404, {"error": f"model '{name}' not found"}
        return 200, {
            "modelfile": "# fake", "parameters": "", "template": "{{ .Prompt }}",
            "details": {"format": "gguf", "family": spec.family, "parameter_size": "137M", "quantization_level": "F16"},
            "model_info": {
                "general.architecture": spec.family,
                f"{spec.family}.context_length": spec.context,
                f"{spec.family}.embedding_length": spec.dim,
            },
            "capabilities": spec.capabilities,
            "modified_at": "2025-01-01T00:00:00Z",
        }

    def _embed(self, body: dict[str, Any]) -> tuple[int, Any]:
        name, spec = self._model(body)
        if spec is None:
            return 404, {"error": f"model '{name}' not found"}
        if "embedding" not in spec.capabilities:
            return 400, {"error": f'"{name}" does not support embeddings'}
        raw = body.get("input", [])
        texts = [raw] if isinstance(raw, str) else list(raw)
        if body.get("truncate") is False and any(len(t.split()) > spec.context for t in texts):
            return 400, {"error": "the input length exceeds the context length"}
        if self.delay_per_text:
            time.sleep(self.delay_per_text * len(texts))
        return 200, {
            "model": name, "embeddings": [self.vector(name, t) for t in texts],
            "total_duration": 1000, "load_duration": 10, "prompt_eval_count": sum(len(t.split()) for t in texts),
        }

    def _chat(self, body: dict[str, Any]) -> tuple[int, Any]:
        name, spec = self._model(body)
        if spec is None:
            return 404, {"error": f"model '{name}' not found"}
        if "completion" not in spec.capabilities:
            return 400, {"error": f'"{name}" does not support chat'}
        with self._lock:  # a settling call takes a scripted reply only when it is marked for one
            wanted = self.chat_replies and (not _settling(body) or self.chat_replies[0].get("_settle"))
            scripted = dict(self.chat_replies.pop(0)) if wanted else None
            if scripted is not None:
                scripted.pop("_settle", None)
        delay = self.chat_delay if scripted is None else scripted.pop("_delay", self.chat_delay)
        if delay:
            time.sleep(delay)
        if scripted is not None and "_status" in scripted:
            status, text = scripted["_status"]
            return status, {"error": text}
        if body.get("tools") and "tools" not in spec.capabilities:
            return 400, {"error": f"registry.ollama.ai/library/{name} does not support tools"}
        done_reason = scripted.pop("_done_reason", "stop") if scripted else "stop"
        message = scripted or {"role": "assistant", "content": _default_reply(body)}
        return 200, {
            "model": name, "created_at": "2025-07-07T20:32:53.844124Z", "message": message,
            "done": True, "done_reason": done_reason, "total_duration": 1, "prompt_eval_count": 1, "eval_count": 1,
        }


def _settling(body: dict[str, Any]) -> bool:
    return isinstance(body.get("format"), dict) and "in_memory" in body["format"].get("properties", {})


def _default_reply(body: dict[str, Any]) -> str:
    """Without a script: a summary in the requested JSON shape that repeats the conversation's
    words (so tests can find it by them), no facts when facts are asked for, ask_agent's draft as
    its settled answer, or plain "ok"."""
    if not body.get("format"):
        return "ok"
    if isinstance(body["format"], dict) and "facts" in body["format"].get("properties", {}):
        return json.dumps({"facts": []})
    if _settling(body):
        drafted = [m for m in body["messages"] if m.get("role") == "assistant"]  # ask_agent's answer, settled
        return json.dumps({"in_memory": True, "answer": drafted[-1]["content"] if drafted else ""})
    text = str(body["messages"][-1]["content"]) if body.get("messages") else ""
    found = _WORD.findall(text)  # its first and last 30 words: the start of a long transcript too
    words = " ".join(found if len(found) <= 60 else found[:30] + found[-30:])
    return json.dumps({"summary": f"Summary: {words}", "key_points": ["fake point"], "decisions": []})


class _Handler(BaseHTTPRequestHandler):
    owner: FakeOllama
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # else header and body segments meet delayed ACKs: +40 ms a call

    def setup(self) -> None:
        super().setup()
        with self.owner._lock:
            self.owner._connections.add(self.connection)
            self.owner.accepted += 1

    def finish(self) -> None:
        with self.owner._lock:
            self.owner._connections.discard(self.connection)
        super().finish()

    def do_GET(self) -> None:  # noqa: N802
        self._respond(*self.owner.handle("GET", self.path, {}))

    def do_POST(self) -> None:  # noqa: N802
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            self._respond(400, {"error": "invalid JSON"})
            return
        with self.owner._lock:
            hang_up = self.path == "/api/embed" and self.owner.hang_up > 0
            self.owner.hang_up -= hang_up
        if hang_up:  # as a server closing a kept-alive connection it deemed idle
            self.close_connection = True
            return
        self._respond(*self.owner.handle("POST", self.path, body))

    def _respond(self, status: int, payload: Any) -> None:
        data = b'{"embeddings": [[0.1, 0.2' if self.owner.malformed else json.dumps(payload).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json; charset=utf-8")
            # Ollama's Go server frames a reply over 2 KB (an embedding) in chunks, a shorter one by length.
            chunked = len(data) > CHUNKING_BYTES and not self.owner.trickle
            self.send_header(*(("Transfer-Encoding", "chunked") if chunked else ("Content-Length", str(len(data)))))
            if 300 <= status < 400:  # a proxy moving the client on: to itself, so following would loop
                self.send_header("Location", self.path)
            self.end_headers()
            if chunked:
                for start in range(0, len(data), 4096):
                    piece = data[start:start + 4096]
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                self.wfile.write(b"0\r\n\r\n")
            elif self.owner.trickle:  # a slow proxy: each read gets a byte before its timeout
                for byte in range(len(data)):
                    self.wfile.write(data[byte:byte + 1])
                    self.wfile.flush()
                    time.sleep(self.owner.trickle)
            else:
                self.wfile.write(data)
        except OSError:
            self.close_connection = True  # the client gave up (timeout tests) or we were stopped

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass


def _tag(name: str, spec: FakeModel) -> dict[str, Any]:
    return {
        "name": f"{name}:latest", "model": f"{name}:latest", "modified_at": "2025-01-01T00:00:00Z",
        "size": 274302450, "digest": "0" * 64,
        "details": {"format": "gguf", "family": spec.family, "parameter_size": "137M", "quantization_level": "F16"},
    }
