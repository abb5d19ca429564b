"""The formats ``ollama-mcp import`` reads, by the names ``--format`` takes (a module of its own,
so the command line can offer them without importing the readers)."""

FORMATS = ("chatgpt", "claude.ai", "claude-code", "codex", "gemini", "memory-server", "ollama-mcp")
EXPECTED = (
    "a ChatGPT data export (the .zip or its conversations.json), a Claude.ai export's conversations.json, "
    "a Claude Code session (.jsonl) or its projects folder, a Codex session or its sessions folder, a Gemini "
    "CLI session or its tmp folder, the MCP memory server's memory.jsonl, or an ollama-mcp export"
)
# The session folders ``import --claude-code`` (``--codex``, ``--gemini``) reads when given no FILE,
# under the user's home (or the variable each client reads, when set).
HISTORY_FOLDERS = {
    "claude-code": ("CLAUDE_CONFIG_DIR", ".claude", "projects"),
    "codex": ("CODEX_HOME", ".codex", "sessions"),
    "gemini": ("GEMINI_CLI_HOME", ".gemini", "tmp"),
}
# What each is called in a sentence ("Imported 3 new conversations from a ChatGPT export").
FORMAT_NAMES = {
    "chatgpt": "a ChatGPT export", "claude.ai": "a Claude.ai export", "claude-code": "Claude Code sessions",
    "codex": "Codex sessions", "gemini": "Gemini CLI sessions",
    "memory-server": "the memory server's memory.jsonl", "ollama-mcp": "an ollama-mcp export",
}
