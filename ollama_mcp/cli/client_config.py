"""``ollama-mcp config --client NAME``: the block (or command) an MCP client needs to start this
installation, with its absolute path and the settings in effect, ready to paste; for
``claude-code-hooks``, the ``hooks`` block that runs ``ollama-mcp hook`` on Claude Code's events.

Clients start servers with a minimal environment and an arbitrary working directory, so the
command is an absolute path and the database an absolute path (or URL) in ``env``; every other
``OLLAMA_MCP_*`` variable and ``OLLAMA_HOST`` set where the command runs is carried over. A
password in a PostgreSQL URL is never printed: the client's config file is not a place for it.
"""

from __future__ import annotations

import json
import shlex
import sys
from collections.abc import Mapping
from pathlib import Path

from ollama_mcp.cli.hooks import EVENTS as HOOK_EVENTS
from ollama_mcp.config import Settings
from ollama_mcp.storage import backends

CLIENTS = ("claude-desktop", "claude-code", "cursor", "vscode", "claude-code-hooks")
HOOK_TIMEOUT_S = 30
NAME = "ollama-mcp"

# Where each client reads the block from, said before it.
_WHERE = {
    "claude-desktop": "Add to claude_desktop_config.json (Claude menu > Settings > Developer > Edit Config), "
    "then restart Claude Desktop:",
    "cursor": "Add to ~/.cursor/mcp.json (or .cursor/mcp.json in a project), then reload Cursor:",
    "vscode": "Add to .vscode/mcp.json in your workspace (or run 'MCP: Open User Configuration'):",
    "claude-code": "Run this once (user scope: every project):",
    "claude-code-hooks": "Merge into ~/.claude/settings.json (every project) or .claude/settings.json (one "
    "project), so Claude Code records its sessions and starts each with the project's memory:",
}


def render(client: str, settings: Settings, env: Mapping[str, str]) -> tuple[str, list[str]]:
    """The text to print for ``client`` (JSON, or a shell command for Claude Code) and notes for
    stderr (what was left out, and why)."""
    command, args = server_command()
    variables, notes = server_env(settings, env)
    if client == "claude-code":
        # The name before -e: -e takes several values and would take the name as one of them
        # (anthropics/claude-code#46121); `--` ends them before the command.
        options = [word for key, value in variables.items() for word in ("-e", f"{key}={value}")]
        words = ["claude", "mcp", "add", "--scope", "user", NAME, *options, "--", command, *args]
        return " ".join(shlex.quote(word) for word in words) + "\n", [_WHERE[client], *notes]
    if client == "claude-code-hooks":
        # Claude Code runs the command through a shell: assignments before it set its environment
        # (only the value is quoted: a quoted `KEY=value` would be taken for the command's name).
        prefix = [f"{key}={shlex.quote(value)}" for key, value in variables.items()]
        hooks = {
            event: [{"hooks": [{
                "type": "command", "timeout": HOOK_TIMEOUT_S,
                "command": " ".join([*prefix, *(shlex.quote(word) for word in [command, *args, "hook", event])]),
            }]}]
            for event in HOOK_EVENTS
        }
        return json.dumps({"hooks": hooks}, indent=2) + "\n", [_WHERE[client], *notes]
    entry: dict[str, object] = {"command": command, "args": args, "env": variables}
    if client == "vscode":
        block: dict[str, object] = {"servers": {NAME: {"type": "stdio", **entry}}}
    else:
        block = {"mcpServers": {NAME: entry}}
    return json.dumps(block, indent=2) + "\n", [_WHERE[client], *notes]


def server_command() -> tuple[str, list[str]]:
    """How this installation is started: its ``ollama-mcp`` script by absolute path, else this
    Python with ``-m ollama_mcp``; ``uvx ollama-mcp`` when running from uv's throwaway cache."""
    python = Path(sys.executable)
    if "uv" in python.parts and any(part.startswith("archive-") for part in python.parts):
        return "uvx", [NAME]
    script = python.parent / NAME
    if script.exists():
        return str(script), []
    return str(python), ["-m", "ollama_mcp"]


def server_env(settings: Settings, env: Mapping[str, str]) -> tuple[dict[str, str], list[str]]:
    """OLLAMA_MCP_DB as the absolute path or URL in effect, and every other setting given here."""
    database, notes = backends.client_database(settings)
    variables = {"OLLAMA_MCP_DB": database}
    for key in sorted(env):
        if key != "OLLAMA_MCP_DB" and (key.startswith("OLLAMA_MCP_") or key == "OLLAMA_HOST"):
            variables[key] = env[key]
    return variables, notes
