"""How long the Claude Code plugin's first start takes from an empty uv cache (#80 item 10).

    python bench/first_start.py [--runs 2]

Copies the committed tree (``git archive HEAD``) to a new folder, as a plugin install does, and
starts it with the plugin's own command (``uv run --directory DIR --frozen --quiet ollama-mcp``)
with a new, empty ``UV_CACHE_DIR``, and times the answer to ``initialize``; then the same without
the lock file (``uv run`` without ``--frozen``: uv resolves first). Alternated, ``--runs`` of each.
The downloads come from PyPI through this machine's network settings (``SSL_CERT_FILE``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}}}


def first_start(locked: bool) -> float:
    work = Path(tempfile.mkdtemp(prefix="plugin-"))
    cache, home = tempfile.mkdtemp(prefix="uv-cache-"), tempfile.mkdtemp(prefix="home-")
    try:
        subprocess.run(f"git -C {ROOT} archive HEAD | tar -x -C {work}", shell=True, check=True)
        if not locked:
            (work / "uv.lock").unlink(missing_ok=True)
        uv = shutil.which("uv") or str(ROOT / ".venv" / "bin" / "uv")
        args = [uv, "run", "--directory", str(work), *(["--frozen"] if locked else []), "--quiet", "ollama-mcp"]
        env = {"PATH": f"{Path(uv).parent}:/usr/bin:/bin", "HOME": home, "UV_CACHE_DIR": cache,
               "OLLAMA_HOST": "http://127.0.0.1:9",
               **{k: v for k, v in os.environ.items() if k in ("SSL_CERT_FILE", "SSL_CERT_DIR")}}
        with (work / "stderr.txt").open("w") as err:
            started = time.monotonic()
            proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, env=env, cwd="/")
            assert proc.stdin and proc.stdout
            proc.stdin.write((json.dumps(INITIALIZE) + "\n").encode())
            proc.stdin.flush()
            line = proc.stdout.readline()
            took = time.monotonic() - started
            proc.kill()
            proc.wait()
        if b'"result"' not in line:
            raise SystemExit(f"no answer to initialize: {(work / 'stderr.txt').read_text()[-500:]}")
        return took
    finally:
        for folder in (work, cache, home):
            shutil.rmtree(folder, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=2)
    args = parser.parse_args()
    times: dict[bool, list[float]] = {True: [], False: []}
    for _ in range(args.runs):
        for locked in (False, True):
            times[locked].append(first_start(locked))
            print(f"{'with the lock' if locked else 'without it'}: {times[locked][-1]:.1f} s", flush=True)
    for locked in (True, False):
        print(f"{'with the lock (--frozen)' if locked else 'without it (resolving)'}: "
              f"median {statistics.median(times[locked]):.1f} s of {args.runs}")


if __name__ == "__main__":
    main()
