"""The formats ``ollama-mcp import`` reads, by the names ``--format`` takes (a module of its own,
so the command line can offer them without importing the readers)."""

FORMATS = ("chatgpt", "claude.ai", "claude-code", "memory-server", "ollama-mcp")
EXPECTED = (
    "a ChatGPT data export (the .zip or its conversations.json), a Claude.ai export's conversations.json, "
    "a Claude Code session (.jsonl) or its projects folder, the MCP memory server's memory.jsonl, "
    "or an ollama-mcp export"
)
# What each is called in a sentence ("Imported 3 new conversations from a ChatGPT export").
FORMAT_NAMES = {
    "chatgpt": "a ChatGPT export", "claude.ai": "a Claude.ai export", "claude-code": "Claude Code sessions",
    "memory-server": "the memory server's memory.jsonl", "ollama-mcp": "an ollama-mcp export",
}
