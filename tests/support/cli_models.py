"""Stand-ins for the model APIs Codex CLI and Gemini CLI talk to: OpenAI's Responses API
(``wire_api = "responses"``) and Google's Gemini API (``GOOGLE_GEMINI_BASE_URL``). Every request
is answered with one assistant message, streamed as each API streams it. They let the real
``codex exec`` and ``gemini -p`` run a session offline, so their hooks fire and they write their
session files as they do for their users."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ANSWER = "The staging proxy listens on port 8443."


def _serve(handler: type[BaseHTTPRequestHandler]) -> ThreadingHTTPServer:
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def _send(self, status: int, kind: str, body: bytes) -> None:
        self.send_response(status)
        self.send_header("content-type", kind)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass


class FakeGemini:
    """Google's Gemini API: ``streamGenerateContent?alt=sse`` (the answer) and ``generateContent``."""

    def __init__(self, answer: str = ANSWER) -> None:
        fake = self
        self.answer = answer

        class Handler(_Handler):
            def do_GET(self) -> None:  # noqa: N802
                self._send(200, "application/json", b'{"models": []}')

            def do_POST(self) -> None:  # noqa: N802
                self.rfile.read(int(self.headers.get("content-length") or 0))
                chunk = {"candidates": [{"content": {"parts": [{"text": fake.answer}], "role": "model"},
                                         "finishReason": "STOP", "index": 0}],
                         "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15}}
                if "countTokens" in self.path:
                    self._send(200, "application/json", b'{"totalTokens": 10}')
                elif "alt=sse" in self.path:
                    self._send(200, "text/event-stream", f"data: {json.dumps(chunk)}\r\n\r\n".encode())
                else:
                    self._send(200, "application/json", json.dumps(chunk).encode())

        self._server = _serve(Handler)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def env(self) -> dict[str, str]:
        """What ``gemini`` needs to use this stand-in: a key it never checks, and the address."""
        return {"GEMINI_API_KEY": "offline", "GOOGLE_GEMINI_BASE_URL": self.url}

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()


class FakeResponses:
    """OpenAI's Responses API as Codex streams it (``response.output_item.done``, ``response.completed``)."""

    def __init__(self, answer: str = ANSWER) -> None:
        self.answer = answer
        self.requests: list[dict[str, Any]] = []
        fake = self

        class Handler(_Handler):
            def do_GET(self) -> None:  # noqa: N802 - the models list Codex may ask for
                self._send(200, "application/json", json.dumps({"object": "list", "data": []}).encode())

            def do_POST(self) -> None:  # noqa: N802
                size = int(self.headers.get("content-length") or 0)
                fake.requests.append(json.loads(self.rfile.read(size) or b"{}"))
                events: list[dict[str, Any]] = [
                    {"type": "response.created", "response": {"id": "resp_1"}},
                    {"type": "response.output_item.done", "output_index": 0, "item": {
                        "type": "message", "role": "assistant", "id": "msg_1",
                        "content": [{"type": "output_text", "text": fake.answer}]}},
                    {"type": "response.completed", "response": {"id": "resp_1", "usage": {
                        "input_tokens": 10, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 5,
                        "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 15}}},
                ]
                body = "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events).encode()
                self._send(200, "text/event-stream", body)

        self._server = _serve(Handler)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def codex_config(self, codex_home: Path) -> None:
        """Point Codex at this stand-in (``config.toml``'s model provider)."""
        codex_home.mkdir(parents=True, exist_ok=True)
        (codex_home / "config.toml").write_text(
            'model = "fake-model"\nmodel_provider = "fake"\n\n[model_providers.fake]\nname = "fake"\n'
            f'base_url = "{self.url}"\nwire_api = "responses"\n'
        )

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
