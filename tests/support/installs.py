"""Helpers for the tests that install ollama-mcp as its users do (the Claude Desktop bundle, the
Claude Code plugin): a committed copy of the working tree, and what uv needs to run it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
UV = Path(sys.executable).parent / "uv"
# How this machine reaches PyPI (a proxy's certificate authority, an index): uv needs them, the
# server does not read them.
NETWORK = ("SSL_CERT_FILE", "SSL_CERT_DIR", "HTTPS_PROXY", "HTTP_PROXY", "NO_PROXY", "UV_INDEX_URL",
           "UV_DEFAULT_INDEX", "UV_NATIVE_TLS")


def need_node_tool(path: Path, package: str) -> None:
    """An npm tool the test drives; CI must have it (.ci/run installs it), elsewhere it may be absent."""
    if path.exists():
        return
    if os.environ.get("CI"):
        raise RuntimeError(f"{package} is missing at {path}; .ci/run must install it (see README)")
    pytest.skip(f"{package} not installed (npm install --no-save {package})")


def committed_copy(tmp_path: Path) -> Path:
    """A repository holding the working tree's tracked files, committed: what a release builds
    and what a user's client fetches from the repository."""
    src = tmp_path / "src"
    names = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z"], capture_output=True, check=True,
                           text=True).stdout.split("\0")
    for name in filter(None, names):
        if (ROOT / name).is_file():
            (src / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, src / name)
    for args in (["init", "-q"], ["add", "-A"], ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "s"]):
        subprocess.run(["git", "-C", str(src), *args], check=True, capture_output=True)
    return src


def uv_env(home: Path) -> dict[str, str]:
    """A minimal environment in which ``uv run`` works as a client's host gives it: uv and this
    environment's Python (never a download), a cache kept between runs under test-artifacts (a
    first run downloads the dependencies through this machine's network settings)."""
    network = {name: os.environ[name] for name in NETWORK if name in os.environ}
    return {**network, "PATH": f"{UV.parent}:/usr/bin:/bin", "HOME": str(home),
            "UV_CACHE_DIR": str(ROOT / "test-artifacts" / "uv-cache"),
            "UV_PYTHON": getattr(sys, "_base_executable", sys.executable), "UV_PYTHON_DOWNLOADS": "never"}
