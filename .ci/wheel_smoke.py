"""The built wheel, installed alone into a fresh venv, works as a user runs it: stdio from working
directory / with a minimal environment (initialize, tools, store, search, a resource), ``doctor``,
and ``serve --http`` with its browser view (templates and stylesheet from the wheel) and REST API. Ollama is
left unreachable on purpose: memories are stored as pending and found by keywords, as promised.
Standard library only: it runs with any Python.

    python .ci/wheel_smoke.py /path/to/fresh-venv
"""

from __future__ import annotations

import json
import os
import re
import select
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any


def main(venv: Path) -> None:
    script = venv / "bin" / "ollama-mcp"
    with tempfile.TemporaryDirectory() as home:
        env = {"PATH": "/usr/bin:/bin", "HOME": home, "OLLAMA_HOST": "127.0.0.1:9",
               "OLLAMA_MCP_DB": str(Path(home) / "memory.db")}
        started = time.monotonic()
        stdio(script, env)
        print(f"stdio: initialize, 14 tools, store, search, resource ok ({time.monotonic() - started:.1f} s)")
        doctor = subprocess.run([str(script), "doctor"], env=env, cwd="/", capture_output=True, text=True, timeout=60)
        assert "database" in doctor.stdout and "ollama" in doctor.stdout.lower(), doctor.stdout + doctor.stderr
        print(f"doctor: ran (exit {doctor.returncode}; Ollama is unreachable on purpose)")
        http(script, env)
        print("serve --http: MCP endpoint, browser view (templates, stylesheet) and REST API ok")


def stdio(script: Path, env: dict[str, str]) -> None:
    proc = subprocess.Popen([str(script)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=env, cwd="/", bufsize=0)
    try:
        ask(proc, 1, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                    "clientInfo": {"name": "wheel-smoke", "version": "0"}})
        send(proc, {"jsonrpc": "2.0", "method": "notifications/initialized"})
        tools = ask(proc, 2, "tools/list", {})["tools"]
        assert len(tools) == 14, [t["name"] for t in tools]
        stored = call(proc, 3, "store_memory", content="The wheel smoke test stored this kestrel note")
        assert stored["embedding_status"] == "pending" and stored["note"], stored  # Ollama is down: said so
        found = call(proc, 4, "search_memories", query="kestrel note")
        assert found["results"][0]["memory_id"] == stored["memory_id"] and found["mode"] == "keyword", found
        listed = ask(proc, 5, "resources/read", {"uri": "memory://conversations"})
        assert "# Conversations" in listed["contents"][0]["text"], listed
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        code = proc.wait(timeout=30)
        stderr = proc.stderr.read().decode() if proc.stderr else ""
        assert code == 0, f"exit {code}: {stderr}"


def http(script: Path, env: dict[str, str]) -> None:
    proc = subprocess.Popen([str(script), "serve", "--http", "--port", "0"], env=env, cwd="/",
                            stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        said = ""
        deadline = time.monotonic() + 60
        while (view := re.search(r"memory view is at (\S+?)(?: |$)", said)) is None:
            assert time.monotonic() < deadline and proc.poll() is None, f"serve --http did not start: {said}"
            said += proc.stderr.readline()
        browser = urllib.request.build_opener(urllib.request.HTTPCookieProcessor())  # the link sets a cookie
        with browser.open(view.group(1), timeout=30) as page:
            html = page.read().decode()
        assert page.status == 200 and "Conversations" in html and "<html" in html.lower(), html[:300]
        css = re.search(r'href="([^"]+\.css)"', html)
        assert css, html[:500]
        base = view.group(1).split("/ui/")[0]
        with browser.open(base + css.group(1), timeout=30) as sheet:
            assert sheet.status == 200 and b"{" in sheet.read()
        # The REST API from the wheel: its document, and a conversation created and read back.
        with urllib.request.urlopen(base + "/api/v1/openapi.json", timeout=30) as spec:
            assert json.load(spec)["openapi"] == "3.1.0"
        create = urllib.request.Request(base + "/api/v1/conversations", data=b'{"name": "wheel"}', method="POST",
                                        headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(create, timeout=30) as created:
            conversation = json.load(created)
        assert created.status == 201 and conversation["name"] == "wheel", conversation
        with urllib.request.urlopen(f"{base}/api/v1/conversations/{conversation['id']}", timeout=30) as read:
            assert json.load(read)["id"] == conversation["id"]
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=30)


def send(proc: subprocess.Popen[bytes], message: dict[str, Any]) -> None:
    assert proc.stdin is not None
    proc.stdin.write(json.dumps(message).encode() + b"\n")


def ask(proc: subprocess.Popen[bytes], request_id: int, method: str, params: dict[str, Any]) -> Any:
    send(proc, {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
    assert proc.stdout is not None
    if not select.select([proc.stdout], [], [], 60)[0]:
        raise AssertionError(f"no answer to {method} within 60 s")
    answer = json.loads(proc.stdout.readline())
    assert answer.get("id") == request_id and "result" in answer, answer
    return answer["result"]


def call(proc: subprocess.Popen[bytes], request_id: int, tool: str, **arguments: Any) -> Any:
    result = ask(proc, request_id, "tools/call", {"name": tool, "arguments": arguments})
    assert not result.get("isError"), result["content"][0]["text"]
    return result["structuredContent"]


if __name__ == "__main__":
    main(Path(sys.argv[1]).resolve())
    os._exit(0)
