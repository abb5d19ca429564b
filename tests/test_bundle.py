"""The Claude Desktop bundle (``.mcpb``), built by ``packaging/build_mcpb.py`` with the official
MCPB CLI, unpacked, and started exactly as its manifest declares, with the launch command worked
out by the CLI package's own ``getMcpConfigForManifest`` (the host's variable substitution)."""

from __future__ import annotations

import hashlib
import json
import sqlite3
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import jsonschema
import pytest
from mcp import Client, StdioServerParameters

from ollama_mcp.mcp.tools import TOOLS
from tests.support.fake_ollama import FakeOllama
from tests.support.installs import UV, committed_copy, need_node_tool, uv_env
from tests.support.mcp_client import call

pytestmark = pytest.mark.anyio
ROOT = Path(__file__).resolve().parent.parent
MANIFEST = ROOT / "packaging" / "mcpb" / "manifest.json"
MCPB = ROOT / "node_modules" / "@anthropic-ai" / "mcpb"
VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]


def _need_mcpb() -> None:
    need_node_tool(MCPB, "@anthropic-ai/mcpb@2.1.2")


def _build(src: Path, out: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(ROOT / "packaging" / "build_mcpb.py"), "--source", str(src),
                           "--out", str(out)], capture_output=True, text=True, timeout=300)


def _launch(unpacked: Path, user_config: dict[str, str]) -> dict[str, object]:
    """The command, arguments and environment Claude Desktop derives from the manifest."""
    script = (
        "import {getMcpConfigForManifest} from '@anthropic-ai/mcpb';\n"
        "const [dir, cfg] = process.argv.slice(1);\n"
        "const manifest = JSON.parse((await import('node:fs')).readFileSync(dir + '/manifest.json', 'utf8'));\n"
        "const config = await getMcpConfigForManifest({manifest, extensionPath: dir, userConfig: JSON.parse(cfg),\n"
        "  systemDirs: {HOME: '/home/user', DESKTOP: '/home/user/Desktop', DOCUMENTS: '/home/user/Documents',\n"
        "               DOWNLOADS: '/home/user/Downloads'}, pathSeparator: '/'});\n"
        "console.log(JSON.stringify(config));\n"
    )
    done = subprocess.run(["node", "--input-type=module", "-e", script, str(unpacked), json.dumps(user_config)],
                          cwd=ROOT, capture_output=True, text=True, check=True, timeout=60)
    return json.loads(done.stdout)


def test_the_manifest_names_every_stdio_tool_with_its_description_at_the_packages_version() -> None:
    manifest = json.loads(MANIFEST.read_text())
    assert manifest["version"] == VERSION
    assert manifest["tools"] == [
        {"name": tool.__name__, "description": (tool.__doc__ or "").strip().splitlines()[0]} for tool, _ in TOOLS
    ]
    env = manifest["server"]["mcp_config"]["env"]
    # Every variable the manifest fills has a default, so none reaches the server unsubstituted.
    for name, value in env.items():
        key = value.removeprefix("${user_config.").removesuffix("}")
        assert "default" in manifest["user_config"][key], name


@pytest.mark.slow
async def test_the_bundle_builds_and_starts_as_its_manifest_declares_from_a_minimal_environment(
    tmp_path: Path, fake_ollama: FakeOllama
) -> None:
    _need_mcpb()
    out = tmp_path / "dist"
    built = _build(committed_copy(tmp_path), out)
    assert built.returncode == 0, built.stderr
    bundle = out / f"ollama-mcp-{VERSION}.mcpb"
    with zipfile.ZipFile(bundle) as archive:
        names = set(archive.namelist())
    assert {"manifest.json", "icon.png", "pyproject.toml", "uv.lock", "README.md", "LICENSE", "ollama_mcp/__main__.py",
            "ollama_mcp/storage/sqlite/migrations/0001_initial.sql", "ollama_mcp/ui/templates/base.html"} <= names
    assert not [n for n in names if n.startswith(("tests/", ".venv/", "node_modules/")) or "__pycache__" in n]

    # The registry entry beside it lists the bundle by its address and hash, valid by the schema.
    entry = json.loads((out / "server.json").read_text())
    jsonschema.validate(entry, json.loads((ROOT / "tests" / "fixtures" / "server_json.schema.json").read_text()))
    packed = entry["packages"][-1]
    assert packed["registryType"] == "mcpb" and packed["identifier"].endswith(f"/v{VERSION}/{bundle.name}")
    assert packed["fileSha256"] == hashlib.sha256(bundle.read_bytes()).hexdigest()

    unpacked = tmp_path / "installed"
    subprocess.run(["npx", "--no-install", "mcpb", "unpack", str(bundle), str(unpacked)], cwd=ROOT, check=True,
                   capture_output=True, timeout=120)
    folder = tmp_path / "memory folder"
    folder.mkdir()
    launch = _launch(unpacked, {"ollama_host": fake_ollama.url, "chat_model": "none", "memory_folder": str(folder)})
    assert launch["command"] == "uv"
    # Claude Desktop supplies uv and a Python; here they are the test environment's.
    env = {**uv_env(tmp_path / "home"), **launch["env"]}  # type: ignore[dict-item]
    assert env["OLLAMA_MCP_CHAT_MODEL"] == "none" and env["OLLAMA_MCP_EMBED_MODEL"] == "nomic-embed-text"
    params = StdioServerParameters(command=str(UV), args=launch["args"], env=env, cwd="/")  # type: ignore[arg-type]
    async with Client(params, mode="legacy") as client:
        tools = {tool.name for tool in (await client.list_tools()).tools}
        assert "ask_agent" not in tools and "store_memory" in tools  # chat model none: no agent
        await call(client, "init_conversation", name="from the bundle")
        stored = await call(client, "store_memory", content="installed from a one-click bundle")
        assert stored["embedding_status"] == "embedded"
        found = await call(client, "search_memories", query="one-click bundle")
        assert found["results"][0]["memory_id"] == stored["memory_id"]
    with sqlite3.connect(folder / "memory.db") as conn:
        assert conn.execute("SELECT content FROM memories").fetchall() == [("installed from a one-click bundle",)]


def test_a_bundle_from_a_tree_with_uncommitted_changes_is_refused(tmp_path: Path) -> None:
    _need_mcpb()
    src = committed_copy(tmp_path)
    (src / "ollama_mcp" / "__init__.py").write_text("# changed\n", encoding="utf-8")
    built = _build(src, tmp_path / "dist")
    assert built.returncode == 1
    assert "uncommitted changes in what the bundle carries (ollama_mcp/__init__.py)" in built.stderr
    assert not (tmp_path / "dist").exists()


def test_a_bundle_whose_manifest_version_is_not_the_packages_is_refused(tmp_path: Path) -> None:
    _need_mcpb()
    src = committed_copy(tmp_path)
    manifest = src / "packaging" / "mcpb" / "manifest.json"
    manifest.write_text(manifest.read_text().replace(f'"version": "{VERSION}"', '"version": "9.9.9"'))
    subprocess.run(["git", "-C", str(src), "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "v"],
                   check=True)
    built = _build(src, tmp_path / "dist")
    assert built.returncode == 1
    assert f"manifest.json says version 9.9.9 but pyproject.toml says {VERSION}" in built.stderr
    assert not (tmp_path / "dist").exists()
