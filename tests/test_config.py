"""Settings from the environment: absolute per-user paths, host forms, and clear refusals."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ollama_mcp import config
from ollama_mcp.config import DEFAULT_EMBED_MODEL, Settings, default_db_path
from ollama_mcp.errors import ConfigError


def test_default_database_path_is_per_user_and_absolute_on_each_platform() -> None:
    env = {"HOME": "/home/ana", "LOCALAPPDATA": r"C:\Users\ana\AppData\Local"}
    assert default_db_path(env, "linux") == Path("/home/ana/.local/share/ollama-mcp/memory.db")
    assert default_db_path({**env, "XDG_DATA_HOME": "/data/ana"}, "linux") == Path("/data/ana/ollama-mcp/memory.db")
    assert default_db_path({**env, "XDG_DATA_HOME": "relative"}, "linux") == Path(
        "/home/ana/.local/share/ollama-mcp/memory.db"
    )
    assert default_db_path(env, "darwin") == Path("/home/ana/Library/Application Support/ollama-mcp/memory.db")
    assert default_db_path(env, "win32") == Path(r"C:\Users\ana\AppData\Local") / "ollama-mcp" / "memory.db"


def test_defaults_need_no_environment_beyond_home() -> None:
    settings = Settings.from_env({"HOME": "/home/ana"})
    assert settings.db_path.is_absolute()
    assert settings.ollama_host == "http://127.0.0.1:11434"
    assert settings.embed_model == DEFAULT_EMBED_MODEL == "nomic-embed-text"


@pytest.mark.parametrize(
    ("raw", "expected"),
    [("127.0.0.1:11434", "http://127.0.0.1:11434"), ("http://gpu-box:11434", "http://gpu-box:11434"),
     ("0.0.0.0:11434", "http://127.0.0.1:11434"), ("", "http://127.0.0.1:11434")],
)
def test_ollama_host_accepts_the_forms_ollama_does(raw: str, expected: str) -> None:
    assert Settings.from_env({"HOME": "/h", "OLLAMA_HOST": raw}).ollama_host == expected


def test_a_relative_database_path_is_refused_because_the_cwd_is_arbitrary() -> None:
    with pytest.raises(ConfigError, match="OLLAMA_MCP_DB must be an absolute path"):
        Settings.from_env({"HOME": "/h", "OLLAMA_MCP_DB": "memory.db"})


def test_a_folder_as_the_database_means_the_usual_file_in_it(tmp_path: Path) -> None:
    # What the Claude Desktop bundle's folder picker gives; a path that is not a folder stays a file.
    assert Settings.from_env({"HOME": "/h", "OLLAMA_MCP_DB": str(tmp_path)}).db_path == tmp_path / "memory.db"
    named = tmp_path / "mine.db"
    assert Settings.from_env({"HOME": "/h", "OLLAMA_MCP_DB": str(named)}).db_path == named
    # A folder not made yet, named with a trailing slash, is a folder too (it made a file called "new").
    fresh = Settings.from_env({"HOME": "/h", "OLLAMA_MCP_DB": f"{tmp_path}/new/"})
    assert fresh.db_path == tmp_path / "new" / "memory.db"


@pytest.mark.parametrize("name", ["OLLAMA_MCP_DB", "OLLAMA_MCP_EMBED_MODEL", "OLLAMA_HOST"])
def test_a_placeholder_the_client_did_not_fill_in_is_refused_naming_the_variable(name: str) -> None:
    with pytest.raises(ConfigError, match=rf"^{name} is '\$\{{user_config.x\}}', a placeholder the client did not"):
        Settings.from_env({"HOME": "/h", name: "${user_config.x}"})


def test_keep_alive_takes_ollamas_durations() -> None:
    assert Settings.from_env({"HOME": "/h"}).keep_alive == "30m"
    for value in ("1h", "600", "-1", "0", "2.5m"):
        assert Settings.from_env({"HOME": "/h", "OLLAMA_MCP_KEEP_ALIVE": value}).keep_alive == value


@pytest.mark.parametrize(
    ("name", "value"),
    [("OLLAMA_MCP_EMBED_TIMEOUT", "soon"), ("OLLAMA_MCP_EMBED_TIMEOUT", "0"), ("OLLAMA_MCP_MAX_CONTENT_CHARS", "-1"),
     ("OLLAMA_MCP_LOG_LEVEL", "LOUD"), ("OLLAMA_MCP_AGENT_CONFIRM", "store_memory,forget_everything"),
     ("OLLAMA_MCP_AGENT", "maybe"), ("OLLAMA_MCP_AGENT_CONTEXT_MESSAGES", "-1"),
     ("OLLAMA_MCP_AGENT_CONFIRM_TIMEOUT", "1"), ("OLLAMA_MCP_AGENT_SYSTEM_PROMPT", "x" * 2001),
     ("OLLAMA_MCP_WAIT_TIMEOUT", "0"), ("OLLAMA_MCP_KEEP_ALIVE", "forever"), ("OLLAMA_MCP_KEEP_ALIVE", "30 minutes"),
     ("OLLAMA_MCP_RELATED_THRESHOLD", "1.5"), ("OLLAMA_MCP_DUPLICATE_THRESHOLD", "0.5")],
)
def test_bad_settings_name_the_variable(name: str, value: str) -> None:
    with pytest.raises(ConfigError, match=name):
        Settings.from_env({"HOME": "/h", name: value})


def test_a_duplicate_threshold_below_the_related_one_is_refused_naming_both() -> None:
    with pytest.raises(ConfigError) as refused:
        Settings.from_env(
            {"HOME": "/h", "OLLAMA_MCP_RELATED_THRESHOLD": "0.8", "OLLAMA_MCP_DUPLICATE_THRESHOLD": "0.7"}
        )
    assert str(refused.value) == (
        "OLLAMA_MCP_DUPLICATE_THRESHOLD (0.7) must not be below OLLAMA_MCP_RELATED_THRESHOLD (0.8): "
        "a duplicate is a closer match than a related conversation."
    )


@pytest.mark.parametrize(
    ("raw", "expected"),
    [("", ("store_memory", "delete_memory", "end_conversation", "delete_conversation")), ("none", ()), (" NONE ", ()),
     ("delete_memory, search_all_conversations", ("search_all_conversations", "delete_memory"))],
)
def test_agent_confirm_lists_the_tools_that_need_a_yes_and_defaults_to_every_writing_one(
    raw: str, expected: tuple[str, ...]
) -> None:
    assert Settings.from_env({"HOME": "/h", "OLLAMA_MCP_AGENT_CONFIRM": raw}).agent_confirm == expected


def test_a_postgresql_url_selects_postgresql_and_is_described_without_its_password() -> None:
    for url in ("postgresql://team:s3cret@db.example:5432/memory", "postgres://team:s3cret@db.example/memory"):
        settings = Settings.from_env({"HOME": "/home/ana", "OLLAMA_MCP_DB": url})
        assert settings.postgres_url == url
        assert settings.database.startswith("PostgreSQL at db.example:5432/memory")
        assert "s3cret" not in settings.database and "team" not in settings.database


def test_a_url_of_another_database_is_refused_plainly_without_printing_its_password() -> None:
    with pytest.raises(ConfigError) as refused:
        Settings.from_env({"HOME": "/home/ana", "OLLAMA_MCP_DB": "mysql://team:s3cret@db.example:3306/memory"})
    message = str(refused.value)
    assert "mysql:// URL" in message and "SQLite file" in message and "postgresql:// URL" in message
    assert "s3cret" not in message and "db.example" not in message


def test_every_ollama_mcp_variable_the_package_names_is_one_it_reads() -> None:
    named = set()
    for path in (Path(__file__).parent.parent / "ollama_mcp").rglob("*.py"):
        named |= set(re.findall(r"OLLAMA_MCP_[A-Z_]*[A-Z]", path.read_text()))
    assert named == set(config.SETTINGS_READ)


def test_a_misspelt_setting_is_named_with_the_setting_it_was_meant_to_be() -> None:
    settings = Settings.from_env({"OLLAMA_MCP_EMBEDMODEL": "mxbai-embed-large", "OLLAMA_MCP_FACTS": "off"})
    assert settings.embed_model == "nomic-embed-text"  # still the default: the typo reads as nothing
    assert settings.unread == (
        "OLLAMA_MCP_EMBEDMODEL is not a setting ollama-mcp reads, so it changes nothing;"
        " did you mean OLLAMA_MCP_EMBED_MODEL?",
    )
