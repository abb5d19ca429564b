"""``ollama-mcp config --client NAME --write``: the server merged into the client's own config
file, where that client reads it (``config_file``), keeping every other server and setting.
Codex's is TOML (``~/.codex/config.toml``), read and written with tomlkit, which keeps the user's
comments, order and formatting; every other client's is JSON.

A file that is not a JSON object (or not TOML), or that cannot be written, is refused with its
path and the fix, and nothing is written. An entry of the same name that differs is refused too, unless the
user asks to replace it. Writing the same entry again changes nothing, not even the file's time.
Before a file is changed, a copy is kept beside it (``*.bak-<time>``). The new text replaces the
old in one rename, with the old file's permissions, so a crash leaves one or the other.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import tomlkit
import tomlkit.exceptions

from ollama_mcp.errors import ConfigError


@dataclass(frozen=True)
class Written:
    path: Path
    changed: bool  # False: the same entry was there already
    backup: Path | None  # the copy of the file as it was, when it existed and changed


def config_file(client: str, env: Mapping[str, str], system: str = sys.platform) -> Path:
    """Where ``client`` reads its servers (``claude-code-hooks``: its hooks) for this user."""
    home = Path(env.get("HOME") or Path.home())
    if system == "darwin":
        support = home / "Library" / "Application Support"
    elif system == "win32":
        support = Path(env.get("APPDATA") or home / "AppData" / "Roaming")
    else:
        support = Path(env.get("XDG_CONFIG_HOME") or home / ".config")
    files = {
        "claude-desktop": support / "Claude" / "claude_desktop_config.json",
        "claude-code": home / ".claude.json",  # the user scope (`claude mcp add --scope user`)
        "cursor": home / ".cursor" / "mcp.json",
        "vscode": support / "Code" / "User" / "mcp.json",  # the user profile's
        "claude-code-hooks": home / ".claude" / "settings.json",
        "codex": Path(env.get("CODEX_HOME") or home / ".codex") / "config.toml",
        "codex-hooks": Path(env.get("CODEX_HOME") or home / ".codex") / "hooks.json",
        "gemini": home / ".gemini" / "settings.json",  # the user scope (`gemini mcp add --scope user`)
        "gemini-hooks": home / ".gemini" / "settings.json",
    }
    return files[client]


def merge_server(path: Path, section: str, name: str, entry: dict[str, Any], *, replace: bool) -> Written:
    """``entry`` as server ``name`` in ``section`` (``mcpServers``, VS Code's ``servers``, Codex's
    ``mcp_servers`` table)."""
    toml = path.suffix == ".toml"
    data: Any = _read_toml(path) if toml else _read(path)
    servers = data.setdefault(section, {})
    if not isinstance(servers, dict):
        raise ConfigError(f"{path}: {section!r} is not a {'table' if toml else 'JSON object'}; fix it by hand, then "
                          "run this again. Nothing was written.")
    old = servers.get(name)
    if toml and old is not None:
        old = old.unwrap() if hasattr(old, "unwrap") else old
    if old == entry:
        return Written(path, False, None)
    if old is not None and not replace:
        raise ConfigError(
            f"{path} already has a server named {name!r} that differs from this one; pass --replace to "
            f"overwrite it (a copy of the file is kept), or --name to add this one beside it. Nothing was written."
        )
    servers[name] = entry
    return _write(path, tomlkit.dumps(data) if toml else json.dumps(data, indent=2, ensure_ascii=False) + "\n")


def merge_hooks(path: Path, hooks: dict[str, list[dict[str, Any]]], *, replace: bool) -> Written:
    """Claude Code's ``hooks`` with ours added to each event. Ours are recognised by their command
    (``ollama-mcp`` ... ``hook``): one that differs is refused unless ``replace``."""
    data = _read(path)
    present = data.setdefault("hooks", {})
    if not isinstance(present, dict):
        raise ConfigError(f"{path}: 'hooks' is not a JSON object; fix it by hand, then run this again. "
                          "Nothing was written.")
    changed = False
    for event, groups in hooks.items():
        listed = present.setdefault(event, [])
        if not isinstance(listed, list):
            raise ConfigError(f"{path}: hooks.{event} is not a list; fix it by hand, then run this again. "
                              "Nothing was written.")
        ours = [g for g in listed if _is_ours(g)]
        if ours == groups:
            continue
        if ours and not replace:
            raise ConfigError(
                f"{path} already runs a different ollama-mcp hook on {event}; pass --replace to overwrite "
                "it (a copy of the file is kept). Nothing was written."
            )
        present[event] = [g for g in listed if not _is_ours(g)] + groups
        changed = True
    if not changed:
        return Written(path, False, None)
    return _write(path, json.dumps(data, indent=2, ensure_ascii=False) + "\n")


def merge_setting(path: Path, key: str, value: object) -> Written:
    """One top-level setting of a JSON settings file (Claude Code's ``cleanupPeriodDays``), the
    rest kept; refused as ``merge_server`` refuses, nothing written."""
    data = _read(path)
    if data.get(key) == value:
        return Written(path, False, None)
    data[key] = value
    return _write(path, json.dumps(data, indent=2, ensure_ascii=False) + "\n")


def _is_ours(group: object) -> bool:
    if not isinstance(group, dict):
        return False
    commands = [h.get("command", "") for h in group.get("hooks", []) if isinstance(h, dict)]
    return any("ollama-mcp" in c and " hook " in f"{c} " for c in commands if isinstance(c, str))


def _read(path: Path) -> dict[str, Any]:
    """The file's JSON object ({} when it does not exist yet)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise ConfigError(f"{path} cannot be read ({exc.strerror}); nothing was written.") from None
    if not text.strip():
        return {}
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ConfigError(
            f"{path} is not valid JSON ({exc}); fix it (or move it away), then run this again. Nothing was written."
        ) from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path} holds JSON that is not an object; fix it, then run this again. "
                          "Nothing was written.")
    return data


def _read_toml(path: Path) -> tomlkit.TOMLDocument:
    """The file's TOML document (an empty one when it does not exist yet)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return tomlkit.document()
    except OSError as exc:
        raise ConfigError(f"{path} cannot be read ({exc.strerror}); nothing was written.") from None
    try:
        return tomlkit.parse(text)
    except tomlkit.exceptions.ParseError as exc:
        raise ConfigError(
            f"{path} is not valid TOML ({exc}); fix it (or move it away), then run this again. Nothing was written."
        ) from None


def _write(path: Path, text: str) -> Written:
    existed = path.exists()
    # Read-only by its mode too: root may write anything, but a file its owner marked read-only
    # was marked so on purpose.
    if existed and (not os.access(path, os.W_OK) or not path.stat().st_mode & 0o200):
        raise ConfigError(f"{path} is read-only; make it writable (chmod u+w), then run this again. "
                          "Nothing was written.")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        backup = None
        if existed:
            stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
            backup = path.with_name(f"{path.name}.bak-{stamp}")
            shutil.copy2(path, backup)
        handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
        try:
            with os.fdopen(handle, "w", encoding="utf-8") as out:
                out.write(text)
                out.flush()
                os.fsync(out.fileno())
            if existed:
                shutil.copymode(path, temporary)
            os.replace(temporary, path)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
    except OSError as exc:
        raise ConfigError(f"{exc.filename or path} cannot be written ({exc.strerror}); nothing was written.") from None
    return Written(path, True, backup)
