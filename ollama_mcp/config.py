"""Turning environment variables into one immutable ``Settings``; the only reader of ``os.environ``."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from ollama_mcp.errors import ConfigError

POSTGRES_SCHEMES = ("postgresql", "postgres")
DB_FILE_NAME = "memory.db"
DEFAULT_OLLAMA_HOST = "http://127.0.0.1:11434"
DEFAULT_EMBED_MODEL = "nomic-embed-text"
# Summaries and the agent: a 3B model calls tools reliably (smaller ones do not), follows a JSON
# schema under constrained decoding, and runs on an 8 GB laptop (about 1.9 GB at Q4).
DEFAULT_CHAT_MODEL = "qwen2.5:3b"
# Whose memory a process acts for: the stdio server, the CLI and a tokenless loopback HTTP server act
# for this one, whose memory is the store OLLAMA_MCP_DB names (so existing stores are its already).
LOCAL_PRINCIPAL = "local"
RELATED_THRESHOLD = 0.6
DUPLICATE_THRESHOLD = 0.97
_PRINCIPAL_NAME = re.compile(r"[a-z][a-z0-9_]{0,31}")
AGENT_TOOLS = (
    "search_memories", "search_all_conversations", "store_memory", "list_conversations", "get_current_time",
    "delete_memory", "end_conversation", "delete_conversation", "summarize_conversation",
)
# The agent's tools that change the store: by default each runs only after the user says yes.
AGENT_WRITING_TOOLS = ("store_memory", "delete_memory", "end_conversation", "delete_conversation")


# Every OLLAMA_MCP_* variable some part of ollama-mcp reads (tests/test_config.py checks the
# package names no other).
SETTINGS_READ = frozenset({
    "OLLAMA_MCP_DB", "OLLAMA_MCP_CHAT_MODEL", "OLLAMA_MCP_EMBED_MODEL", "OLLAMA_MCP_FACTS", "OLLAMA_MCP_RETENTION_DAYS",
    "OLLAMA_MCP_PRINCIPAL", "OLLAMA_MCP_AGENT_MODEL", "OLLAMA_MCP_AGENT_CONFIRM", "OLLAMA_MCP_LOG_LEVEL",
    "OLLAMA_MCP_KEEP_ALIVE", "OLLAMA_MCP_AGENT_TOOLS", "OLLAMA_MCP_AGENT", "OLLAMA_MCP_WAIT_TIMEOUT",
    "OLLAMA_MCP_RELATED_THRESHOLD", "OLLAMA_MCP_MAX_CONTENT_CHARS", "OLLAMA_MCP_EMBED_TIMEOUT",
    "OLLAMA_MCP_DUPLICATE_THRESHOLD", "OLLAMA_MCP_CHAT_TIMEOUT", "OLLAMA_MCP_AGENT_SYSTEM_PROMPT",
    "OLLAMA_MCP_AGENT_MAX_STEPS", "OLLAMA_MCP_AGENT_DEADLINE", "OLLAMA_MCP_COMPACT_TOKENS",
    "OLLAMA_MCP_COMPACT_MESSAGES", "OLLAMA_MCP_AGENT_CONTEXT_MESSAGES", "OLLAMA_MCP_AGENT_CONFIRM_TIMEOUT",
    "OLLAMA_MCP_RESPONSE_CHARS", "OLLAMA_MCP_CHAT_CALLS_PER_HOUR", "OLLAMA_MCP_ALLOWED_ORIGINS",
    "OLLAMA_MCP_REDACT",
})


def _origins(raw: str) -> tuple[str, ...]:
    """OLLAMA_MCP_ALLOWED_ORIGINS: comma-separated origins, each scheme://host[:port] exactly."""
    found = []
    for item in (part.strip().rstrip("/").lower() for part in raw.split(",")):
        if not item:
            continue
        if not re.fullmatch(r"https?://[a-z0-9.\-\[\]:]+", item):
            raise ConfigError(
                f"OLLAMA_MCP_ALLOWED_ORIGINS: {item!r} is not an origin; list pages as scheme://host:port, such as "
                "http://localhost:3000, separated by commas."
            )
        found.append(item)
    return tuple(found)


def unread_settings(env: Mapping[str, str]) -> tuple[str, ...]:
    """A sentence for each ``OLLAMA_MCP_*`` variable in ``env`` that no part of ollama-mcp reads."""
    unread = sorted(n for n in env if n.upper().startswith("OLLAMA_MCP_") and n not in SETTINGS_READ)
    if not unread:
        return ()
    import difflib  # noqa: PLC0415 - only for a mistyped name: kept off the way to initialize

    said = []
    for name in unread:
        near = difflib.get_close_matches(name.upper(), SETTINGS_READ, n=1, cutoff=0.6)
        hint = f"; did you mean {near[0]}?" if near else "; the README's table lists the settings"
        said.append(f"{name} is not a setting ollama-mcp reads, so it changes nothing{hint}")
    return tuple(said)


DEFAULT_MAX_CONTENT_CHARS = 100_000  # a memory's or a turn's text, at most (OLLAMA_MCP_MAX_CONTENT_CHARS)

@dataclass(frozen=True)
class Settings:
    """Everything the server is configured with; build it with ``from_env``."""

    db_path: Path  # the SQLite file (when postgres_url is None)
    # A libpq URL (postgresql://user@host:5432/db): the PostgreSQL backend instead of the file.
    postgres_url: str | None = None
    ollama_host: str = DEFAULT_OLLAMA_HOST
    embed_model: str = DEFAULT_EMBED_MODEL
    # Seconds one embedding request may take before the memory is stored as pending instead.
    # A cold model load on a laptop takes a few seconds; Claude Desktop gives up at 60 s.
    embed_timeout: float = 15.0
    # Seconds a search or a store waits for its one embedding before answering without it
    # (keyword results with a notice; the memory stored as pending): a hung Ollama costs seconds.
    wait_timeout: float = 3.0
    # How long Ollama keeps the embedding model loaded after a call (Ollama's own default is 5
    # minutes; a reload costs the next call seconds). Ollama's format: 30m, 1h, 0, -1 (forever).
    keep_alive: str = "30m"
    connect_timeout: float = 2.0
    max_content_chars: int = DEFAULT_MAX_CONTENT_CHARS
    # Characters of memory text one tool result carries at most (a search's hits share it; an
    # export page and a read_memory page hold about this much): it keeps a result well inside
    # a client's limit (Claude Code: about 25k tokens), the text counted twice as MCP sends it.
    response_chars: int = 10_000
    # Web pages (scheme://host:port) whose browser requests the HTTP server accepts besides its own:
    # a page on another local port is another program, refused unless the operator lists it.
    allowed_origins: tuple[str, ...] = ()
    log_level: str = "INFO"
    # How long the background backfill waits after a failed embedding attempt, at most.
    backfill_max_delay: float = 60.0
    # The chat model writing summaries (None: summaries only when the client gives one).
    chat_model: str | None = DEFAULT_CHAT_MODEL
    # A summary is written in the background, so a slow CPU-only model may take its time.
    chat_timeout: float = 120.0
    # Facts are extracted from conversations whose metadata does not say (metadata.facts).
    facts: bool = False
    # Secrets in every text written are replaced before it is stored (ollama_mcp/redaction.py);
    # OLLAMA_MCP_REDACT=off keeps text verbatim, a conversation's metadata.redact_secrets=false its own.
    redact: bool = True
    # Delete conversations untouched for this many days (None: keep forever).
    retention_days: float | None = None
    # Compaction defaults; a conversation's metadata may override them (compact_after_messages,
    # compact_after_tokens).
    compact_messages: int = 50
    compact_tokens: int = 8000
    # The chat-model calls background work (summaries, compaction, facts) may make in any hour,
    # across every process on the store; 0 pauses it (services/chat_budget.py).
    chat_calls_per_hour: int = 60
    # Conversations whose end summaries are at least this alike (cosine similarity of their
    # vectors) are linked as related, and past the second as duplicates (bench/README.md).
    related_threshold: float = RELATED_THRESHOLD
    duplicate_threshold: float = DUPLICATE_THRESHOLD
    # Background jobs: the longest wait between retries, and how long a claimed job stays reserved
    # without its worker renewing the claim (after that, the worker died and the job is resumed).
    job_max_delay: float = 300.0
    job_lease: float = 30.0
    retention_interval: float = 3600.0
    # Keyword index upkeep: checked this often, merged when this many memories arrived since.
    upkeep_interval: float = 60.0
    upkeep_min_new: int = 64
    # ask_agent
    agent_model: str | None = None  # None: the chat model
    agent_max_steps: int = 5
    agent_tools: tuple[str, ...] = AGENT_TOOLS
    agent_deadline: float = 45.0
    # The agent's tools that need the user's confirmation (elicitation) before they run.
    agent_confirm: tuple[str, ...] = AGENT_WRITING_TOOLS
    agent_enabled: bool = True  # OLLAMA_MCP_AGENT=off: no ask_agent at all (summaries unaffected)
    agent_context_messages: int = 20  # recent messages of the conversation the agent is given
    agent_confirm_timeout: float = 30.0  # a human who does not answer a confirmation has said no
    agent_system_prompt: str | None = None  # added to the agent's instructions
    # Whose memory this is (tokens of the HTTP server name one; OLLAMA_MCP_PRINCIPAL for the CLI).
    principal: str = LOCAL_PRINCIPAL
    # OLLAMA_MCP_* variables this version does not read, each said with its closest setting: a
    # typo would otherwise be ignored without a word (doctor warns, the server logs it).
    unread: tuple[str, ...] = ()

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        """Read ``OLLAMA_MCP_*`` and ``OLLAMA_HOST`` from ``env`` (default: the process environment)."""
        env = os.environ if env is None else env
        _refuse_placeholders(env)
        db_path, postgres_url = _database("OLLAMA_MCP_DB", env.get("OLLAMA_MCP_DB", ""))
        if db_path is None:
            db_path = default_db_path(env, sys.platform)
        related = _number(env, "OLLAMA_MCP_RELATED_THRESHOLD", RELATED_THRESHOLD, 0.0, 1.0)
        duplicate = _number(env, "OLLAMA_MCP_DUPLICATE_THRESHOLD", DUPLICATE_THRESHOLD, 0.0, 1.0)
        if duplicate < related:
            raise ConfigError(
                f"OLLAMA_MCP_DUPLICATE_THRESHOLD ({duplicate:g}) must not be below OLLAMA_MCP_RELATED_THRESHOLD "
                f"({related:g}): a duplicate is a closer match than a related conversation."
            )
        chat_model = _optional_model(env.get("OLLAMA_MCP_CHAT_MODEL"), DEFAULT_CHAT_MODEL)
        facts = _switch(env, "OLLAMA_MCP_FACTS", default=False)
        if facts and chat_model is None:
            raise ConfigError(
                "OLLAMA_MCP_FACTS=on asks the chat model to extract facts, but OLLAMA_MCP_CHAT_MODEL=none; "
                "set a chat model such as qwen2.5:3b, or OLLAMA_MCP_FACTS=off."
            )
        return cls(
            db_path=db_path,
            postgres_url=postgres_url,
            ollama_host=_host(env.get("OLLAMA_HOST", "")),
            embed_model=env.get("OLLAMA_MCP_EMBED_MODEL", "").strip() or DEFAULT_EMBED_MODEL,
            embed_timeout=_number(env, "OLLAMA_MCP_EMBED_TIMEOUT", 15.0, 0.1, 600.0),
            wait_timeout=_number(env, "OLLAMA_MCP_WAIT_TIMEOUT", 3.0, 0.1, 600.0),
            keep_alive=_keep_alive(env.get("OLLAMA_MCP_KEEP_ALIVE", "")),
            max_content_chars=int(
                _number(env, "OLLAMA_MCP_MAX_CONTENT_CHARS", DEFAULT_MAX_CONTENT_CHARS, 1, 10_000_000)
            ),
            response_chars=int(_number(env, "OLLAMA_MCP_RESPONSE_CHARS", 10_000, 1_000, 1_000_000)),
            log_level=_log_level(env.get("OLLAMA_MCP_LOG_LEVEL", "INFO")),
            chat_model=chat_model,
            facts=facts,
            redact=_switch(env, "OLLAMA_MCP_REDACT", default=True),
            chat_timeout=_number(env, "OLLAMA_MCP_CHAT_TIMEOUT", 120.0, 1.0, 3600.0),
            retention_days=_number(env, "OLLAMA_MCP_RETENTION_DAYS", 0, 0, 365_000) or None,
            compact_messages=int(_number(env, "OLLAMA_MCP_COMPACT_MESSAGES", 50, 4, 100_000)),
            compact_tokens=int(_number(env, "OLLAMA_MCP_COMPACT_TOKENS", 8000, 500, 10_000_000)),
            chat_calls_per_hour=_whole(env, "OLLAMA_MCP_CHAT_CALLS_PER_HOUR", 60, 0, 100_000),
            related_threshold=related,
            duplicate_threshold=duplicate,
            agent_model=env.get("OLLAMA_MCP_AGENT_MODEL", "").strip() or None,
            agent_max_steps=int(_number(env, "OLLAMA_MCP_AGENT_MAX_STEPS", 5, 0, 50)),
            agent_tools=_agent_tools(env.get("OLLAMA_MCP_AGENT_TOOLS", "")),
            agent_confirm=_agent_confirm(env.get("OLLAMA_MCP_AGENT_CONFIRM", "")),
            agent_enabled=_switch(env, "OLLAMA_MCP_AGENT", default=True),
            agent_context_messages=int(_number(env, "OLLAMA_MCP_AGENT_CONTEXT_MESSAGES", 20, 0, 200)),
            agent_confirm_timeout=_number(env, "OLLAMA_MCP_AGENT_CONFIRM_TIMEOUT", 30.0, 5.0, 600.0),
            agent_system_prompt=_prompt_addition(env.get("OLLAMA_MCP_AGENT_SYSTEM_PROMPT", "")),
            agent_deadline=_number(env, "OLLAMA_MCP_AGENT_DEADLINE", 45.0, 5.0, 3600.0),
            principal=principal_name("OLLAMA_MCP_PRINCIPAL", env.get("OLLAMA_MCP_PRINCIPAL", "") or LOCAL_PRINCIPAL),
            allowed_origins=_origins(env.get("OLLAMA_MCP_ALLOWED_ORIGINS", "")),
            unread=unread_settings(env),
        )

    def for_principal(self, principal: str) -> Settings:
        """These settings acting for ``principal`` (a name ``principal_name`` accepted)."""
        return replace(self, principal=principal)

    @property
    def store_path(self) -> Path:
        """The SQLite file of this principal's memory: OLLAMA_MCP_DB itself for the local principal,
        else a file of its own in a folder beside it (``memory.principals/alice.db``)."""
        if self.principal == LOCAL_PRINCIPAL:
            return self.db_path
        return self.principals_folder / f"{self.principal}.db"

    @property
    def store_file(self) -> Path | None:
        """The SQLite file this principal's memories live in; None when they live in a PostgreSQL
        database (no file to protect, shrink or check for)."""
        return self.store_path if self.postgres_url is None else None

    def client_database(self) -> tuple[str, list[str]]:
        """OLLAMA_MCP_DB as a client's config should carry it (the absolute file, or the URL without
        its password), and what the user must do about what was left out."""
        if self.postgres_url is None:
            return str(self.db_path), []
        parts = urlsplit(self.postgres_url)
        if not parts.password:
            return urlunsplit(parts), []
        host = parts.netloc.rsplit("@", 1)[1]
        parts = parts._replace(netloc=f"{parts.username}@{host}" if parts.username else host)
        notes = ["The password in OLLAMA_MCP_DB was left out: put it in ~/.pgpass "
                 "(or PGPASSWORD in env) on the machine that runs the client."]
        return urlunsplit(parts), notes

    @property
    def principals_folder(self) -> Path:
        """Where the SQLite files of principals other than the local one are kept."""
        return self.db_path.with_name(f"{self.db_path.stem}.principals")

    @property
    def store_url(self) -> str:
        """The PostgreSQL URL of this principal's memory (PostgreSQL only): OLLAMA_MCP_DB, with the
        principal's schema first on the search path (``postgres.db.in_schema``)."""
        if self.postgres_url is None:
            raise ConfigError("OLLAMA_MCP_DB names a SQLite file, not a PostgreSQL database.")
        if self.pg_schema is None:
            return self.postgres_url
        from ollama_mcp.storage.postgres.db import in_schema  # noqa: PLC0415 - psycopg only for PostgreSQL users

        return in_schema(self.postgres_url, self.pg_schema)

    @property
    def pg_schema(self) -> str | None:
        """The PostgreSQL schema of this principal's memory (None: the database's default, ``public``)."""
        return None if self.principal == LOCAL_PRINCIPAL else f"ollama_mcp_{self.principal}"

    def with_database(self, value: str, name: str = "--to") -> Settings:
        """These settings with another database (``ollama-mcp migrate --to``), checked by the same
        rules as OLLAMA_MCP_DB; ``name`` is what errors call the value."""
        if not value.strip():
            raise ConfigError(f"{name} is empty; give an absolute SQLite file path or a postgresql:// URL.")
        db_path, postgres_url = _database(name, value)
        return replace(self, db_path=db_path or self.db_path, postgres_url=postgres_url)

    @property
    def database(self) -> str:
        """Where the memories live, for logs and reports: the file, or host:port/database (no password)."""
        if self.postgres_url is None:
            return str(self.store_path)
        from ollama_mcp.storage.postgres.db import describe  # noqa: PLC0415 - psycopg only for PostgreSQL users

        schema = "" if self.pg_schema is None else f" (schema {self.pg_schema})"
        return f"PostgreSQL at {describe(self.postgres_url)}{schema}"

    @property
    def agent_chat_model(self) -> str | None:
        return self.agent_model or self.chat_model

    @property
    def agent_available(self) -> bool:
        """Whether ask_agent is offered: switched on, with a chat model to run it."""
        return self.agent_enabled and self.agent_chat_model is not None


def is_principal_name(name: str) -> bool:
    return _PRINCIPAL_NAME.fullmatch(name) is not None


def principal_name(field: str, raw: str) -> str:
    """A principal's name as given (it names a file and a PostgreSQL schema), or a ConfigError."""
    name = raw.strip()
    if not is_principal_name(name):
        raise ConfigError(
            f"{field} must be a principal's name: a lowercase letter, then up to 31 lowercase letters, "
            f"digits or underscores (such as alice or team_ml); got {raw!r}."
        )
    return name


def _database(name: str, raw: str) -> tuple[Path | None, str | None]:
    """(the SQLite file, the PostgreSQL URL) that ``raw`` names; (None, None) when it is empty."""
    db = raw.strip()
    if "://" in db:
        # Named by its scheme only: a database URL may carry a password.
        scheme = db.split("://", 1)[0].lower()
        if scheme not in POSTGRES_SCHEMES:
            raise ConfigError(
                f"{name} is a {scheme}:// URL; ollama-mcp keeps memories in a SQLite file (an absolute "
                f"path) or in PostgreSQL (a postgresql:// URL). Set {name} to one of those."
            )
        return None, db
    if not db:
        return None, None
    db_path = Path(db).expanduser()
    if not db_path.is_absolute():
        raise ConfigError(
            f"{name} must be an absolute path, got {db!r}; clients such as Claude "
            "Desktop start servers in an arbitrary working directory, so a relative path "
            "would put the database somewhere different each time."
        )
    # A folder (what the Claude Desktop bundle's folder picker gives) holds the usual file name;
    # so does one named with a trailing slash that is not made yet ("/path/newfolder/" made a file
    # called newfolder).
    folder = db_path.is_dir() or db.endswith(("/", "\\"))
    return (db_path / DB_FILE_NAME if folder else db_path), None


def _refuse_placeholders(env: Mapping[str, str]) -> None:
    """A ``${...}`` left in a variable we read is a client's template it did not fill in (an MCPB
    host keeps ``${user_config.x}`` as it is when the setting has no value): said, never used as a
    path or a model name."""
    for name in (*SETTINGS_READ, "OLLAMA_HOST"):
        value = env.get(name, "")
        if value.startswith("${") and value.endswith("}"):
            raise ConfigError(
                f"{name} is {value!r}, a placeholder the client did not fill in; set it in the client's "
                "settings for ollama-mcp (or remove the variable to use the default)."
            )


def default_db_path(env: Mapping[str, str], platform: str) -> Path:
    """The per-user data file: never relative to the working directory."""
    home = Path(env.get("HOME") or env.get("USERPROFILE") or Path.home())
    if platform == "darwin":
        base = home / "Library" / "Application Support"
    elif platform.startswith("win"):
        base = Path(env.get("LOCALAPPDATA") or home / "AppData" / "Local")
    else:
        xdg = env.get("XDG_DATA_HOME", "")
        base = Path(xdg) if xdg and Path(xdg).is_absolute() else home / ".local" / "share"
    return base / "ollama-mcp" / DB_FILE_NAME


def _host(raw: str) -> str:
    raw = raw.strip()
    if not raw:
        return DEFAULT_OLLAMA_HOST
    if "://" not in raw:
        raw = "http://" + raw
    # Ollama itself listens on 0.0.0.0 when OLLAMA_HOST says so; a client must dial loopback.
    return raw.replace("://0.0.0.0", "://127.0.0.1")


def _number(env: Mapping[str, str], name: str, default: float, low: float, high: float) -> float:
    raw = env.get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ConfigError(f"{name} must be a number between {low:g} and {high:g}, got {raw!r}.") from None
    if not low <= value <= high:
        raise ConfigError(f"{name} must be between {low:g} and {high:g}, got {raw!r}.")
    return value


def _whole(env: Mapping[str, str], name: str, default: int, low: int, high: int) -> int:
    """A whole number setting: 2.5 calls an hour is refused, not read as 2."""
    raw = env.get(name, "").strip()
    if not raw:
        return default
    if not re.fullmatch(r"\d+", raw) or not low <= int(raw) <= high:
        raise ConfigError(f"{name} must be a whole number from {low:,} to {high:,}, got {raw!r}.")
    return int(raw)


_DURATION = re.compile(r"-?\d+(\.\d+)?(ms|s|m|h)?")


def _keep_alive(raw: str) -> str:
    """OLLAMA_MCP_KEEP_ALIVE in Ollama's duration format: a number of seconds, or with a unit."""
    value = raw.strip() or "30m"
    if not _DURATION.fullmatch(value):
        raise ConfigError(
            f"OLLAMA_MCP_KEEP_ALIVE must be a duration such as 30m, 1h, 600 (seconds), 0 (unload at "
            f"once) or -1 (keep loaded), got {raw.strip()!r}."
        )
    return value


def _switch(env: Mapping[str, str], name: str, *, default: bool) -> bool:
    raw = env.get(name, "").strip().lower()
    if not raw:
        return default
    if raw in {"on", "true", "1", "yes"}:
        return True
    if raw in {"off", "false", "0", "no"}:
        return False
    raise ConfigError(f"{name} must be on or off, got {raw!r}.")


MAX_PROMPT_ADDITION = 2000


def _prompt_addition(raw: str) -> str | None:
    text = raw.strip()
    if len(text) > MAX_PROMPT_ADDITION:
        raise ConfigError(
            f"OLLAMA_MCP_AGENT_SYSTEM_PROMPT is {len(text)} characters; keep it under {MAX_PROMPT_ADDITION} "
            "(it is sent with every ask_agent step)."
        )
    return text or None


def _log_level(raw: str) -> str:
    level = raw.strip().upper() or "INFO"
    if level not in {"DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"}:
        raise ConfigError(f"OLLAMA_MCP_LOG_LEVEL must be DEBUG, INFO, WARNING or ERROR, got {raw!r}.")
    return level


def _optional_model(raw: str | None, default: str) -> str | None:
    """A model name; unset means the default, and ``none`` (or ``off``) turns the feature off."""
    value = (raw or "").strip()
    if not value:
        return default
    return None if value.lower() in {"none", "off"} else value


def _agent_confirm(raw: str) -> tuple[str, ...]:
    """OLLAMA_MCP_AGENT_CONFIRM: tool names, or ``none``; empty: every writing tool."""
    if raw.strip().lower() == "none":
        return ()
    return _tool_names(
        "OLLAMA_MCP_AGENT_CONFIRM", raw, AGENT_WRITING_TOOLS,
        f"list some of {', '.join(AGENT_TOOLS)}, or 'none' to let the agent write without asking",
    )


def _agent_tools(raw: str) -> tuple[str, ...]:
    """OLLAMA_MCP_AGENT_TOOLS: the agent's tools; empty: all of them."""
    return _tool_names("OLLAMA_MCP_AGENT_TOOLS", raw, AGENT_TOOLS, f"choose from {', '.join(AGENT_TOOLS)}")


def _tool_names(name: str, raw: str, default: tuple[str, ...], fix: str) -> tuple[str, ...]:
    """A comma-separated list of the agent's tool names (in AGENT_TOOLS' order), ``default`` when empty."""
    names = [part.strip() for part in raw.split(",") if part.strip()]
    if not names:
        return default
    unknown = sorted(set(names) - set(AGENT_TOOLS))
    if unknown:
        raise ConfigError(f"{name} names unknown tools {', '.join(unknown)}; {fix}.")
    return tuple(tool for tool in AGENT_TOOLS if tool in names)
