"""The command line: every command and option with its help, as ``ollama-mcp --help`` shows them.
What each command does is ``main``'s."""

from __future__ import annotations

import argparse

from ollama_mcp import __version__
from ollama_mcp.cli.client_config import CLIENTS
from ollama_mcp.cli.client_config import NAME as CLIENT_NAME
from ollama_mcp.services.imports.formats import FORMATS


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ollama-mcp",
        description=(
            "Local-first conversation memory for MCP clients. With no command, serves MCP over "
            "stdio (what Claude Desktop and other clients start). Configuration comes from "
            "environment variables: OLLAMA_MCP_DB, OLLAMA_HOST, OLLAMA_MCP_EMBED_MODEL, ... (see README)."
        ),
    )
    parser.add_argument("--version", action="version", version=f"ollama-mcp {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    server = commands.add_parser(
        "serve",
        help="serve MCP over stdin/stdout (the default), or with --http over streamable HTTP",
        description="With no options, serves MCP over stdin/stdout, as MCP clients start it. With --http, serves "
        "MCP over streamable HTTP at http://HOST:PORT/mcp for clients that connect by URL. Once tokens exist "
        "(`ollama-mcp token create`), every HTTP request needs one, and sees only its principal's memory. "
        "Example: ollama-mcp serve --http --port 8765",
    )
    server.add_argument("--http", action="store_true", help="serve over streamable HTTP instead of stdio")
    # No defaults here: given without --http they are refused, and `http` holds the defaults.
    server.add_argument("--host", help="address to listen on (default 127.0.0.1; another address needs tokens)")
    server.add_argument("--port", type=int, help="default: 8765; 0 picks any free port")
    server.add_argument("--public-url", metavar="URL", help="the URL clients use, when a reverse proxy serves it "
                        "(such as https://memory.example.com/mcp): its Host and Origin are accepted")
    server.add_argument("--stateless", action="store_true", help="no MCP sessions: any instance behind a load "
                        "balancer answers any request (no confirmations for ask_agent's deletions over the older "
                        "protocol)")
    tokens = commands.add_parser(
        "token",
        help="create, list or revoke the bearer tokens of the HTTP server",
        description="Each token opens one principal's memory over HTTP. `token create NAME` prints a new token "
        "once (only its hash is kept); --principal names whose memory it opens (default: NAME). Give each "
        "person or client its own token. Example: ollama-mcp token create alice-laptop --principal alice",
    )
    token_commands = tokens.add_subparsers(dest="token_command", metavar="ACTION", required=True)
    creator = token_commands.add_parser("create", help="make a token and print it once")
    creator.add_argument("name", metavar="NAME", help="who holds it, such as alice-laptop")
    creator.add_argument("--principal", metavar="P", help="whose memory it opens (default: NAME)")
    token_commands.add_parser("list", help="every token: name, principal, created, revoked")
    revoker = token_commands.add_parser("revoke", help="revoke a token at once")
    revoker.add_argument("name", metavar="NAME")
    commands.add_parser(
        "doctor",
        help="check the database, SQLite, Ollama and the embedding model, and say how to fix what fails",
        description="Checks what normal use needs and prints one line per check with the fix for each "
        "failure. Changes nothing. Exit code 1 when something blocks normal use.",
    )
    commands.add_parser(
        "stats",
        help="show conversations, memories, messages, pending work, vectors per model and the database size",
        description="Prints what the database holds. Read-only; needs no Ollama.",
    )
    exporter = commands.add_parser(
        "export",
        help="write every conversation (or one) as JSON or Markdown",
        description="Writes conversations with their summaries, memories (every version) and messages. "
        "JSON keeps every id and can be read back with `ollama-mcp import`; vectors are not included "
        "(they are recomputed after an import). Example: ollama-mcp export -o backup.json",
    )
    exporter.add_argument("--conversation", metavar="ID", help="only this conversation")
    exporter.add_argument("--format", choices=("json", "markdown"), default="json", help="default: json")
    exporter.add_argument("-o", "--output", metavar="FILE", help="write here (owner-only) instead of standard output")
    exporter.add_argument("--force", action="store_true", help="replace FILE if it exists")
    importer = commands.add_parser(
        "import",
        help="bring in ChatGPT, Claude.ai, Claude Code, Codex, Gemini CLI or memory-server history, or an export",
        description="Imports a ChatGPT data export (the .zip or its conversations.json), a Claude.ai "
        "export's conversations.json, Claude Code sessions (a .jsonl file or the projects folder, with "
        "Claude Code's own MEMORY.md files, read-only), Codex or Gemini CLI sessions (a file or their "
        "folder), the MCP memory server's memory.jsonl, or a file written by `ollama-mcp export`; the "
        "format is told from the content. --claude-code, --codex and --gemini find their sessions "
        "themselves (~/.claude/projects, ~/.codex/sessions, ~/.gemini/tmp). Each chat becomes a "
        "conversation with its title, its turns with their "
        "original times. Ids come from the source's, so importing twice changes nothing and a newer "
        "export adds only what is new. A conversation or line that cannot be read is skipped and named "
        "with the reason. "
        "Vectors and summaries are computed afterwards by the server (or now: `ollama-mcp reembed`).",
    )
    importer.add_argument("file", metavar="FILE", nargs="?",
                          help="the file or folder, or - for standard input (none with --claude-code and the like)")
    found = importer.add_mutually_exclusive_group()
    for client, where in (("claude-code", "~/.claude/projects"), ("codex", "~/.codex/sessions"),
                          ("gemini", "~/.gemini/tmp")):
        found.add_argument(f"--{client}", dest="history", action="store_const", const=client,
                           help=f"every session of this user's {client} history ({where}); run it again any time")
    importer.add_argument("--format", choices=FORMATS, help="the format, when telling it from the content is wrong")
    importer.add_argument("--dry-run", action="store_true", help="count what would be added; write nothing")
    importer.add_argument("--since", metavar="DATE", help="leave out turns before DATE (such as 2024-01-31)")
    importer.add_argument(
        "--summarize", action="store_true",
        help="have the chat model summarize each imported conversation, in the background and within "
        "OLLAMA_MCP_CHAT_CALLS_PER_HOUR (default: no summaries; the turns are searchable without them)",
    )
    importer.add_argument(
        "--restore-deleted", action="store_true",
        help="bring back the conversations and turns you deleted since an earlier import of them "
        "(by default what you deleted stays deleted)",
    )
    reembedder = commands.add_parser(
        "reembed",
        help="compute vectors for every memory with the configured (or given) model, with progress",
        description="Embeds every memory that has no vector of the model yet; run it after switching "
        "OLLAMA_MCP_EMBED_MODEL or after an import to have semantic search at once. Interrupt it "
        "at any time: running it again resumes. --force recomputes every vector of the model "
        "(after the model changed under the same name).",
    )
    reembedder.add_argument("--model", metavar="M", help="default: OLLAMA_MCP_EMBED_MODEL")
    reembedder.add_argument("--force", action="store_true", help="drop the model's vectors and compute them all again")
    pruner = commands.add_parser(
        "prune",
        help="delete expired conversations now (ttl_hours, OLLAMA_MCP_RETENTION_DAYS)",
        description="Applies retention now: conversations past their ttl_hours, and with "
        "OLLAMA_MCP_RETENTION_DAYS set, those idle for longer, are deleted with everything of "
        "them. The server also does this at start-up and hourly. --dry-run lists without deleting.",
    )
    pruner.add_argument("--dry-run", action="store_true", help="list what would be deleted; delete nothing")
    commands.add_parser(
        "shrink",
        help="give back the disk space a SQLite store holds free (an older version's store keeps it)",
        description="Rewrites the SQLite database (and each person's, for the HTTP server) without the "
        "free space deleted rows left, and lets it give such space back by itself from then on: a store "
        "created by ollama-mcp 0.1.0 keeps it otherwise (`ollama-mcp doctor` says how much). Run it with "
        "no client running: it holds the database while it copies it (about a second per 100 MB), and other "
        "processes' writes wait for it. Nothing stored changes. PostgreSQL does this by itself.",
    )
    migrator = commands.add_parser(
        "migrate",
        help="copy the whole store to another backend (a PostgreSQL URL, or a SQLite file)",
        description="Copies every conversation, memory version, message, summary, job, audit row and "
        "vector from the store OLLAMA_MCP_DB names into --to, keeping every id; with it the HTTP "
        "server's tokens (they keep working), its shares, and every other principal's memory. Running it again adds "
        "nothing, and resumes a copy that was interrupted. Counts are checked at the end; any "
        "difference fails loudly. The source is left as it is. Example: "
        "ollama-mcp migrate --to postgresql://memory@db.example/memory",
    )
    forgetter = commands.add_parser(
        "forget",
        help="delete conversations for good: one, those idle for longer than a period, or all",
        description="Deletes conversations with every memory version, message, summary, vector, "
        "keyword entry and job, in one transaction each: the same delete as the "
        "delete_conversation tool and retention. --older-than also deletes, from the conversations "
        "still in use, every memory stored longer ago (through delete_memory's path). "
        "--dry-run lists and counts what would go. "
        "Examples: ollama-mcp forget --older-than 90d --dry-run; ollama-mcp forget --all --yes",
    )
    which = forgetter.add_mutually_exclusive_group(required=True)
    which.add_argument("--conversation", metavar="ID", help="this conversation")
    which.add_argument(
        "--older-than", metavar="AGE",
        help="conversations with no activity for AGE (90d, 12w, 6m or 1y), and older memories in the others",
    )
    which.add_argument("--all", action="store_true", help="every conversation (needs --yes)")
    forgetter.add_argument("--yes", action="store_true", help="confirm --all")
    forgetter.add_argument(
        "--dry-run", action="store_true", help="list and count what would be deleted; delete nothing"
    )
    auditor = commands.add_parser(
        "audit",
        help="show every write to the store: when, through which door, what, which ids (never the text)",
        description="Prints the write audit, newest first: each write through a tool, the agent, the "
        "CLI, an import or retention, with its time, action, conversation and memory ids and a digest "
        "of its arguments. Example: ollama-mcp audit --since 2026-11-01",
    )
    auditor.add_argument("--since", metavar="DATE", help="from this ISO 8601 date or time on")
    auditor.add_argument("--limit", type=int, default=100, metavar="N", help="at most N rows (default 100)")
    reviewer = commands.add_parser(
        "conflicts",
        help="review the facts that changed: open conflicts, recent supersessions; undo or confirm one",
        description="A later statement of the same thing (where someone lives, who they work for, "
        "which database, which day) supersedes the earlier one: searches put it first and mark the old "
        "one. This lists the supersessions to review (two values said at the same moment, or a change "
        "read with low confidence) and the recent ones, each with OLDER and NEWER memory ids. "
        "--undo OLDER NEWER says the older statement still holds (it is never superseded again); "
        "--confirm OLDER NEWER takes one off the review list. Example: ollama-mcp conflicts --undo 3f2c... 9a1b...",
    )
    reviewer.add_argument("--undo", nargs=2, metavar=("OLDER", "NEWER"), help="the older statement still holds")
    reviewer.add_argument("--confirm", nargs=2, metavar=("OLDER", "NEWER"), help="the change is right")
    reviewer.add_argument("--limit", type=int, default=20, metavar="N", help="at most N of each list (default 20)")
    redactor = commands.add_parser(
        "redact",
        help="find the secrets already in the store (API keys, tokens, passwords, private keys); --apply replaces them",
        description="New text has its secrets replaced before it is stored (unless OLLAMA_MCP_REDACT=off). "
        "--scan reads every memory, version, tool call, conversation name and summary already stored and counts "
        "the secrets by kind; --apply replaces them in place with [redacted: <kind>], drops their vectors (the "
        "server embeds the new text), updates the keyword index, and rewrites the database so the old text is "
        "gone from its files (PostgreSQL: VACUUM FULL, which locks each table while it runs). A conversation "
        "whose metadata says redact_secrets: false is left as it is. Example: ollama-mcp redact --scan --apply",
    )
    redactor.add_argument("--scan", action="store_true", help="read the whole store and count its secrets")
    redactor.add_argument("--apply", action="store_true", help="replace what the scan finds (with --scan)")
    configurer = commands.add_parser(
        "config",
        help="print what an MCP client needs to start this server (absolute path and settings included)",
        description="Prints the block to paste into the client's configuration (for Claude Code: the "
        "command to run), with this installation's absolute path and the OLLAMA_MCP_* settings of "
        "this shell. Example: ollama-mcp config --client claude-desktop",
    )
    configurer.add_argument("--client", required=True, choices=CLIENTS, help="the MCP client to configure")
    configurer.add_argument("--write", action="store_true",
                            help="merge it into the client's own config file (a copy of the file is kept)")
    configurer.add_argument("--replace", action="store_true", help="with --write: overwrite an entry of that name")
    configurer.add_argument("--name", default=CLIENT_NAME, help=f"the server's name there (default: {CLIENT_NAME})")
    configurer.add_argument(
        "--cleanup-period-days", type=int, metavar="DAYS",
        help="with --write and --client claude-code or claude-code-hooks: set Claude Code's cleanupPeriodDays "
        "(how long it keeps session transcripts; 30 unless set) in its settings.json, backed up first",
    )
    configurer.add_argument("--url", help="a shared server's MCP URL (serve --http) instead of this installation")
    configurer.add_argument("--token-env", metavar="VAR", help="with --url: the variable holding your token")
    configurer.add_argument("--token-file", metavar="FILE", help="with --url: the file holding your token")
    viewer = commands.add_parser(
        "ui",
        help="serve a local web page to see, search, correct and delete memories (127.0.0.1 only)",
        description="Serves the browser view of the memory on 127.0.0.1 and prints its link, which carries "
        "a fresh session token: conversations, search, editing and deleting memories, export and import, "
        "and the health of the store and Ollama. It works beside running MCP servers on the same store. "
        "Example: ollama-mcp ui --open",
    )
    viewer.add_argument("--port", type=int, default=8766, help="default: 8766; 0 picks any free port")
    viewer.add_argument("--open", action="store_true", help="open the link in the default browser")
    hook = commands.add_parser(
        "hook",
        help="record a Claude Code session: run by Claude Code's hooks (see the README), reads the hook's JSON",
        description="Run by Claude Code as a hook command with the hook's JSON on stdin: SessionStart prints "
        "what this project's earlier sessions said (as additionalContext), UserPromptSubmit and Stop record "
        "the turns, SessionEnd ends the conversation. It never calls Ollama and exits 0 whatever "
        "the payload or the store (a line on stderr says when nothing was recorded); only a command line "
        "naming an event it does not handle exits 1, which Claude Code shows without blocking. "
        "`ollama-mcp config --client claude-code-hooks` prints the "
        "settings block. Example: ollama-mcp hook SessionStart < payload.json",
    )
    hook.add_argument("event", nargs="?", help="SessionStart, UserPromptSubmit, Stop or SessionEnd "
                      "(default: the payload's hook_event_name)")
    migrator.add_argument(
        "--to", required=True, metavar="DB", help="a postgresql:// URL or an absolute SQLite file path"
    )
    return parser
