"""``ollama-mcp config --client NAME``: the block (or command) an MCP client needs to start this
installation, with its absolute path and the settings in effect, ready to paste; for
``claude-code-hooks``, the ``hooks`` block that runs ``ollama-mcp hook`` on Claude Code's events.
With ``--url``, the entry of a shared HTTP server instead, its bearer token taken from a file or a
variable and never printed (the printed block refers to it). With ``--write``, the entry is merged
into the client's own config file instead of printed (``client_files``).

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
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import tomlkit

from ollama_mcp.cli.client_files import Written, config_file, merge_hooks, merge_server
from ollama_mcp.cli.hook_payload import CLIENT_EVENT_NAMES, HOOK_CLIENTS
from ollama_mcp.config import Settings
from ollama_mcp.errors import ConfigError
from ollama_mcp.services import tokens

CLIENTS = (
    "claude-desktop", "claude-code", "cursor", "vscode", "claude-code-hooks", "codex", "codex-hooks", "gemini",
    "gemini-hooks",
)
HOOKS = {"claude-code-hooks": "claude-code", "codex-hooks": "codex", "gemini-hooks": "gemini"}  # and whose
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
    "codex": "Add to ~/.codex/config.toml (or let --write merge it), then start Codex:",
    "codex-hooks": "Merge into ~/.codex/hooks.json (or let --write do it), then trust the hooks once in Codex "
    "(/hooks), so Codex records its sessions and starts each with the project's memory:",
    "gemini": "Add to ~/.gemini/settings.json (every project) or .gemini/settings.json (one project), then "
    "restart Gemini CLI:",
    "gemini-hooks": "Merge into ~/.gemini/settings.json (or let --write do it), then restart Gemini CLI, so it "
    "records its sessions and starts each with the project's memory:",
}
_WHERE_REMOTE = {
    "claude-code": "Run this once (user scope: every project); the shell puts the token in:",
    "cursor": "Add to ~/.cursor/mcp.json, then reload Cursor (it reads ${env:NAME} from its environment):",
    "vscode": "Add to your user mcp.json ('MCP: Open User Configuration'):",
    "gemini": "Add to ~/.gemini/settings.json (Gemini CLI reads $NAME from its environment):",
}


@dataclass(frozen=True)
class Remote:
    """A shared HTTP server: its MCP URL, and where its bearer token is (a variable or a file;
    None: a server without tokens)."""

    url: str
    token_env: str | None = None
    token_file: Path | None = None

    def token(self, env: Mapping[str, str]) -> str | None:
        """The token itself, for a file being written; checked, so a typo is not written."""
        if self.token_file is not None:
            try:
                secret = self.token_file.read_text(encoding="utf-8").strip()
            except OSError as exc:
                raise ConfigError(f"--token-file {self.token_file}: {exc.strerror}; pass the file "
                                  "`ollama-mcp token create` output was saved in.") from None
            where = f"--token-file {self.token_file}"
        elif self.token_env is not None:
            secret = env.get(self.token_env, "").strip()
            where = f"--token-env {self.token_env}"
            if not secret:
                raise ConfigError(f"{where}: the variable {self.token_env} is not set here; set it to the token "
                                  "`ollama-mcp token create` printed.")
        else:
            return None
        if not tokens.well_formed(secret):
            raise ConfigError(f"{where}: that is not an ollama-mcp token (omcp_ and 43 characters); pass the one "
                              "`ollama-mcp token create` printed.")
        return secret

    def reference(self, shell: bool) -> str | None:
        """How a printed block names the token without showing it."""
        if self.token_file is not None:
            return f"$(cat {shlex.quote(str(self.token_file))})" if shell else None
        if self.token_env is not None:
            return f"${self.token_env}" if shell else f"${{env:{self.token_env}}}"
        return None


def remote(url: str | None, token_env: str | None, token_file: str | None) -> Remote | None:
    """The ``--url`` options checked: an http(s) URL of the MCP endpoint, one token source."""
    if url is None:
        if token_env or token_file:
            raise ConfigError("--token-env and --token-file go with --url (the address of a shared server).")
        return None
    parsed = urlsplit(url)
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise ConfigError(f"--url {url!r} is not an http(s) URL; pass the address `ollama-mcp serve --http` "
                          "printed, such as http://127.0.0.1:8765/mcp.")
    if token_env and token_file:
        raise ConfigError("--token-env and --token-file both given; pass one.")
    return Remote(url, token_env, None if token_file is None else Path(token_file).expanduser().resolve())


def render(
    client: str, settings: Settings, env: Mapping[str, str], served: Remote | None = None
) -> tuple[str, list[str]]:
    """The text to print for ``client`` (JSON, or a shell command for Claude Code) and notes for
    stderr (what was left out, and why)."""
    if served is not None:
        return _render_remote(client, served)
    command, args = server_command()
    variables, notes = server_env(settings, env)
    if client == "claude-code":
        # The name before -e: -e takes several values and would take the name as one of them
        # (anthropics/claude-code#46121); `--` ends them before the command.
        options = [word for key, value in variables.items() for word in ("-e", f"{key}={value}")]
        words = ["claude", "mcp", "add", "--scope", "user", NAME, *options, "--", command, *args]
        return " ".join(shlex.quote(word) for word in words) + "\n", [_WHERE[client], *notes]
    if client in HOOKS:
        return json.dumps({"hooks": hook_groups(variables, HOOKS[client])}, indent=2) + "\n", [_WHERE[client], *notes]
    section, entry = _section(client), stdio_entry(client, variables)
    return _block(client, {section: {NAME: entry}}), [_WHERE[client], *notes]


def _block(client: str, block: dict[str, Any]) -> str:
    """A config block as ``client``'s file holds it: TOML for Codex, else JSON."""
    return tomlkit.dumps(block) if client == "codex" else json.dumps(block, indent=2) + "\n"


def write(
    client: str, settings: Settings, env: Mapping[str, str], served: Remote | None, *, name: str, replace: bool,
) -> tuple[Written, list[str]]:
    """Merge this server (or the hooks) into ``client``'s own config file; notes for stderr."""
    path = config_file(client, env)
    if client in HOOKS:
        if served is not None:
            raise ConfigError("--url is for a client's servers; the hooks record into the store this shell names.")
        variables, notes = server_env(settings, env)
        return merge_hooks(path, hook_groups(variables, HOOKS[client]), replace=replace), notes
    if served is not None:
        return merge_server(path, _section(client), name, remote_entry(client, served, served.token(env)),
                            replace=replace), []
    variables, notes = server_env(settings, env)
    return merge_server(path, _section(client), name, stdio_entry(client, variables), replace=replace), notes


def stdio_entry(client: str, variables: dict[str, str]) -> dict[str, Any]:
    """How ``client`` starts this installation (Claude Code and VS Code name the transport)."""
    command, args = server_command()
    entry: dict[str, Any] = {"command": command, "args": args, "env": variables}
    return {"type": "stdio", **entry} if client in ("vscode", "claude-code") else entry


def remote_entry(client: str, served: Remote, token: str | None) -> dict[str, Any]:
    """How ``client`` reaches a shared HTTP server; ``token``: the bearer token, or its reference."""
    if client == "claude-desktop":
        raise ConfigError(
            "Claude Desktop adds a remote server under Settings > Connectors, not in its config file; run "
            "ollama-mcp on this machine instead (config --client claude-desktop, without --url)."
        )
    if client == "codex":  # streamable HTTP; the token by the variable's name, or as a header
        entry: dict[str, Any] = {"url": served.url}
        if served.token_env is not None:  # Codex reads the variable itself: the token stays out of the file
            entry["bearer_token_env_var"] = served.token_env
        elif token is not None:
            entry["http_headers"] = {"Authorization": f"Bearer {token}"}
        return entry
    entry = {"httpUrl": served.url} if client == "gemini" else {"url": served.url}
    if client in ("vscode", "claude-code"):
        entry = {"type": "http", **entry}
    if token is not None:
        entry["headers"] = {"Authorization": f"Bearer {token}"}
    return entry


def hook_groups(variables: dict[str, str], client: str = "claude-code") -> dict[str, list[dict[str, Any]]]:
    """Claude Code's (or Codex's: the same shape) ``hooks``: ``ollama-mcp hook EVENT`` on each
    event the client has. It runs the command through a shell: assignments before it set its
    environment (only the value is quoted: a quoted ``KEY=value`` would be taken for the command's
    name)."""
    command, args = server_command()
    prefix = [f"{key}={shlex.quote(value)}" for key, value in variables.items()]
    named = [] if client == "claude-code" else ["--client", client]
    their_names = CLIENT_EVENT_NAMES.get(client, {})
    timeout = HOOK_TIMEOUT_S * 1000 if client == "gemini" else HOOK_TIMEOUT_S  # Gemini CLI counts milliseconds
    return {
        their_names.get(event, event): [{"hooks": [{
            "type": "command", "timeout": timeout,
            "command": " ".join([*prefix, *(shlex.quote(word) for word in [command, *args, "hook", *named, event])]),
        }]}]
        for event in HOOK_CLIENTS[client]
    }


def _render_remote(client: str, served: Remote) -> tuple[str, list[str]]:
    if client in HOOKS:
        raise ConfigError("--url is for a client's servers; the hooks record into the store this shell names.")
    notes = [_WHERE_REMOTE.get(client, _WHERE.get(client, ""))]
    if client == "claude-code":
        words = ["claude", "mcp", "add", "--transport", "http", "--scope", "user", NAME, served.url]
        line = " ".join(shlex.quote(word) for word in words)
        reference = served.reference(shell=True)
        if reference is not None:  # double quotes: the shell puts the token in, this command never shows it
            line += f' --header "Authorization: Bearer {reference}"'
        return line + "\n", notes
    reference = served.reference(shell=False)
    if client in ("gemini", "codex") and served.token_env is not None:
        reference = f"${served.token_env}"  # Gemini CLI expands $NAME in settings.json; Codex reads the variable
    if client == "vscode" and served.token_file is not None:
        reference = "${input:ollama-mcp-token}"  # VS Code asks once and keeps it in its secret storage
    entry = remote_entry(client, served, reference)
    block: dict[str, Any] = {_section(client): {NAME: entry}}
    if reference == "${input:ollama-mcp-token}":
        block["inputs"] = [{"type": "promptString", "id": "ollama-mcp-token", "password": True,
                            "description": f"The ollama-mcp token in {served.token_file}"}]
    if served.token_file is not None and client in ("cursor", "gemini", "codex"):
        header = {"Authorization": "Bearer <the token in " + str(served.token_file) + ">"}
        entry["http_headers" if client == "codex" else "headers"] = header
        notes.append("It reads no file: put the token in place of <...>, or let --write do it.")
    return _block(client, block), notes


def _section(client: str) -> str:
    return {"vscode": "servers", "codex": "mcp_servers"}.get(client, "mcpServers")


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
    database, notes = settings.client_database()
    variables = {"OLLAMA_MCP_DB": database}
    for key in sorted(env):
        if key != "OLLAMA_MCP_DB" and (key.startswith("OLLAMA_MCP_") or key == "OLLAMA_HOST"):
            variables[key] = env[key]
    return variables, notes
