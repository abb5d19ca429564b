"""The terminal surface: arguments, logging to stderr, and one handler turning errors into exit codes."""

from __future__ import annotations

import argparse
import gc
import logging
import os
import signal
import sys
from collections.abc import Sequence

from ollama_mcp import __version__
from ollama_mcp.cli.client_config import CLIENTS, remote, render, write
from ollama_mcp.cli.client_config import NAME as CLIENT_NAME
from ollama_mcp.config import LOCAL_PRINCIPAL, Settings
from ollama_mcp.domain import Check
from ollama_mcp.errors import ConfigError, OllamaMcpError
from ollama_mcp.services.imports.formats import FORMATS


def _parser() -> argparse.ArgumentParser:
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
        help="bring in ChatGPT, Claude.ai, Claude Code or memory-server history, or an export of ours",
        description="Imports a ChatGPT data export (the .zip or its conversations.json), a Claude.ai "
        "export's conversations.json, Claude Code sessions (a .jsonl file or the projects folder), the "
        "MCP memory server's memory.jsonl, or a file written by `ollama-mcp export`; the format is told "
        "from the content. Each chat becomes a conversation with its title, its turns with their "
        "original times. Ids come from the source's, so importing twice changes nothing and a newer "
        "export adds only what is new. A conversation or line that cannot be read is skipped and named "
        "with the reason. "
        "Vectors and summaries are computed afterwards by the server (or now: `ollama-mcp reembed`).",
    )
    importer.add_argument("file", metavar="FILE", help="the file or folder, or - for standard input")
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


def main(argv: Sequence[str] | None = None) -> None:
    args = _parser().parse_args(argv)
    if args.command == "hook":
        sys.exit(_hook(args.event))
    try:
        if args.command == "serve" and args.http:
            settings = Settings.from_env()
            _configure_logging(settings.log_level)
            _serve_http(settings, args)
            return
        if args.command in (None, "serve"):
            if args.command == "serve":
                _stdio_only(args)
            _serve(_settings_for_serving())
            return
        settings = Settings.from_env()
        _configure_logging(settings.log_level)
        if args.command == "doctor":
            sys.exit(_doctor(settings))
        elif args.command == "config":
            _config(settings, args)
        elif args.command == "ui":
            _ui(settings, args.port, args.open)
        elif args.command == "token":
            _token(settings, args)
        elif args.command == "stats":
            from ollama_mcp.services.doctor import stats  # noqa: PLC0415  (kept off the serve path)

            for label, value in stats(settings):
                print(f"{label:<14} {value}")
        else:
            sys.exit(_maintenance(settings, args))
    except OllamaMcpError as exc:
        print(f"ollama-mcp: {exc}", file=sys.stderr)
        sys.exit(2)
    except OSError as exc:  # e.g. an export -o FILE in a folder that does not exist
        print(f"ollama-mcp: {exc.filename or 'a file'}: {exc.strerror}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:
        sys.exit(130)


def _config(settings: Settings, args: argparse.Namespace) -> None:
    """Print the client's block, or (``--write``) merge it into the client's config file."""
    served = remote(args.url, args.token_env, args.token_file)
    if not args.write:
        if args.replace or args.name != CLIENT_NAME:
            raise ConfigError("--replace and --name go with --write.")
        text, notes = render(args.client, settings, os.environ, served)
        for note in notes:
            print(note, file=sys.stderr)
        sys.stdout.write(text)
        return
    written, notes = write(args.client, settings, os.environ, served, name=args.name, replace=args.replace)
    for note in notes:
        print(note, file=sys.stderr)
    if not written.changed:
        print(f"{written.path} already has this entry; nothing was changed.")
    else:
        kept = f" (the previous file is kept as {written.backup.name})" if written.backup else ""
        print(f"wrote {args.name!r} into {written.path}{kept}. Restart the client to use it.")


def _hook(event: str | None) -> int:
    """``hook`` as the full command line parsed it (``__main__`` usually routes it sooner)."""
    from ollama_mcp.cli.hook_command import command  # noqa: PLC0415  (kept off the serve path)

    status = command([] if event is None else [event])
    return 1 if status is None else status


def _settings_for_serving() -> Settings | ConfigError:
    """The settings, or why they cannot be used: a server that exited before ``initialize`` would
    show the client only a disconnected server, so it serves and every tool call gives the fix."""
    try:
        settings = Settings.from_env()
    except ConfigError as exc:
        _configure_logging("INFO")
        logging.getLogger(__name__).error("the settings cannot be used: %s", exc)
        return exc
    _configure_logging(settings.log_level)
    return settings


def _serve(settings: Settings | ConfigError) -> None:
    # The imports ahead (the SDK, then the app's in a worker thread) make ~100k objects and almost
    # no garbage (~800 objects), yet set off the collector's passes over all of them: 30-70 ms of
    # a ~0.5 s start on two cores. ``server.imports_done`` collects again once the app is imported.
    gc.disable()
    from ollama_mcp.mcp.server import build_server  # noqa: PLC0415  (the CLI's other commands need no MCP)

    if isinstance(settings, Settings):
        logging.getLogger(__name__).info("serving MCP over stdio; database %s", settings.database)
    if sys.stdin.isatty():
        _started_by_hand()
    build_server(settings).run("stdio")


def _stdio_only(args: argparse.Namespace) -> None:
    given = [
        flag
        for flag, value in (
            ("--host", args.host),
            ("--port", args.port),
            ("--public-url", args.public_url),
            ("--stateless", args.stateless),
        )
        if value not in (None, False)
    ]
    if given:
        raise ConfigError(f"{', '.join(given)} only apply to --http; add --http to serve over HTTP.")


def _serve_http(settings: Settings, args: argparse.Namespace) -> None:
    import anyio  # noqa: PLC0415  (kept off the stdio path)

    from ollama_mcp import listen  # noqa: PLC0415
    from ollama_mcp.host import http  # noqa: PLC0415

    sock = listen.bind(args.host or http.DEFAULT_HOST, http.DEFAULT_PORT if args.port is None else args.port)
    anyio.run(http.serve, settings, sock, args.public_url, args.stateless)


def _token(settings: Settings, args: argparse.Namespace) -> None:
    import anyio  # noqa: PLC0415  (kept off the serve path)

    from ollama_mcp.cli import admin  # noqa: PLC0415

    if args.token_command == "create":
        token, secret = anyio.run(admin.create_token, settings, args.name, args.principal)
        print(f"created token {token.name!r} for principal {token.principal!r}. It is shown only this once; "
              "give it to its holder:", file=sys.stderr)
        print(secret)
    elif args.token_command == "list":
        found = anyio.run(admin.list_tokens, settings)
        if not found:
            print("no tokens: `ollama-mcp token create NAME` makes one", file=sys.stderr)
        for token in found:
            state = f"revoked {token.revoked_at}" if token.revoked_at else "active"
            print(f"{token.name:<24} {token.principal:<20} created {token.created_at}  {state}")
    else:
        anyio.run(admin.revoke_token, settings, args.name)
        print(f"revoked token {args.name!r}; requests carrying it are refused from now on")


def _started_by_hand() -> None:
    """Run in a terminal, the server says what it is and stops on Ctrl-C.

    An MCP client talks to it over a pipe; a person at a terminal gets one line saying so. Ctrl-C
    must end it at once, so SIGINT gets the system's default action, set before the line is shown:
    the kernel ends the process, as it ends ``cat``. A Python handler would not do: it runs only
    when the main thread next runs Python, and a SIGINT the kernel hands to one of the worker
    threads (the SDK's stdin reader, the store's) leaves the main thread asleep in the event loop's
    poll; 13 of 40 Ctrl-Cs sent the moment the line appeared were lost so on two busy cores. Ending
    without unwinding is safe: every acknowledged write is committed, SQLite's WAL needs no close,
    and the log's handlers write each record through. The shell sees 130, as for any program ended
    by Ctrl-C.
    """
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    print(
        "ollama-mcp is an MCP server: an MCP client (Claude Desktop, Claude Code, ...) starts it and "
        "talks to it over stdin/stdout, so it is waiting for one here. To check the setup run "
        "`ollama-mcp doctor`; to stop, press Ctrl-C.",
        file=sys.stderr, flush=True,
    )


def _maintenance(settings: Settings, args: argparse.Namespace) -> int:
    import anyio  # noqa: PLC0415  (kept off the serve path)

    from ollama_mcp.cli import admin  # noqa: PLC0415

    if args.command == "export":
        from ollama_mcp.cli import files  # noqa: PLC0415

        # The output is checked before the store is opened, and written only once complete.
        target = files.checked_output(args.output, settings, force=args.force) if args.output else None
        text, count = anyio.run(admin.export_store, settings, args.conversation, args.format)
        if target is None:
            sys.stdout.write(text)
        else:
            files.write_private(target, text)
            print(f"exported {count:,} conversation(s) to {target}", file=sys.stderr)
    elif args.command == "import":
        imported = anyio.run(
            admin.import_file, settings, args.file, args.format, args.since, args.dry_run, args.summarize,
            args.restore_deleted,
        )
        print(admin.import_summary(imported, settings.chat_calls_per_hour))
        # Everything in it was skipped (broken, or of no format imported): not a success.
        if imported.skipped and not (imported.turns or imported.new_conversations or imported.deleted_turns):
            print(f"{args.file}: nothing in it could be imported; see what was skipped above", file=sys.stderr)
            return 1
    elif args.command == "reembed":
        done, model = anyio.run(admin.reembed, settings, args.model, args.force)
        print(f"embedded {done:,} memories with {model}; every memory now has a vector of it")
    elif args.command == "migrate":
        destination = settings.with_database(args.to)
        reports, access = anyio.run(admin.migrate, settings, destination)
        for principal, report in reports.items():
            totals = report.totals
            whose = "" if principal == LOCAL_PRINCIPAL else f" (principal {principal})"
            print(f"copied to {destination.database}{whose}: {report.conversations:,} new conversation(s), "
                  f"{report.memories:,} new memories, {report.vectors:,} new vectors; counts match "
                  f"({totals['conversations']:,} conversations, {totals['memories']:,} memories, "
                  f"{totals['vectors']:,} vectors, {totals['jobs']:,} jobs, {totals['audit']:,} audit rows, "
                  f"{totals['relations']:,} relations)")
        if access.totals["tokens"] or access.totals["shares"]:
            print(f"copied {access.tokens:,} new token(s) and {access.shares:,} new share(s); the target holds all "
                  f"{access.totals['tokens']:,} token(s) and {access.totals['shares']:,} share(s) as the source does")
    elif args.command == "audit":
        for record in anyio.run(admin.write_log, settings, args.since, max(1, args.limit)):
            print(f"{record.at}  {record.door:<9} {record.action:<20} {record.conversation_id or '-':<36}  "
                  f"{record.memory_id or '-'}")
    elif args.command == "forget":
        forgotten, total, older = anyio.run(
            admin.forget, settings, args.conversation, args.older_than, args.all, args.yes, args.dry_run
        )
        verb = "would delete" if args.dry_run else "deleted"
        print(f"{verb} {len(forgotten):,} conversation(s) with {total:,} memories (versions, messages and summaries)")
        for conversation_id, name, count in forgotten:
            print(f"  {conversation_id}  {count:>7,}  {name}")
        if args.older_than:
            print(f"{verb} {older:,} older memories from the conversations still in use")
    elif args.command == "shrink":
        shrunk = anyio.run(admin.shrink, settings)
        if shrunk is None:
            print("PostgreSQL gives the space of deleted rows back by itself (autovacuum); nothing to do")
        for path, result in shrunk or []:
            print(f"{path}: {result.before / 2**20:,.1f} MiB -> {result.after / 2**20:,.1f} MiB"
                  f" ({max(result.before - result.after, 0) / 2**20:,.1f} MiB given back)")
            if result.log_left:
                print(f"  its write-ahead log keeps {result.log_left / 2**20:,.1f} MiB while another process reads"
                      " the store; that process empties it when it is next idle")
    elif args.command == "prune":
        found = anyio.run(admin.prune, settings, args.dry_run)
        verb = "would delete" if args.dry_run else "deleted"
        print(f"{verb} {len(found):,} conversation(s)")
        for conversation_id, name in found:
            print(f"  {conversation_id}  {name}")
    return 0


def _ui(settings: Settings, port: int, open_browser: bool) -> None:
    import anyio  # noqa: PLC0415  (kept off the serve path)

    from ollama_mcp.ui import run  # noqa: PLC0415  (the web stack only for this command)

    sock = run.bind(port)
    anyio.run(run.serve, settings, sock, open_browser)


def _doctor(settings: Settings) -> int:
    import anyio  # noqa: PLC0415  (kept off the serve path)

    from ollama_mcp.services.doctor import run_checks  # noqa: PLC0415

    checks = anyio.run(run_checks, settings)
    for check in checks:
        mark = "ok  " if check.ok else ("FAIL" if check.blocking else "warn")
        print(f"{mark} {check.name:<12} {check.detail}")
    print(f"\n{closing_line(checks)}")
    return 1 if any(not c.ok and c.blocking for c in checks) else 0


def closing_line(checks: list[Check]) -> str:
    """``doctor``'s last word: whether storing and searching work, and what does not work fully."""
    failed = [c.name for c in checks if not c.ok and c.blocking]
    degraded = [c.name for c in checks if not c.ok and not c.blocking]
    if failed:
        return f"{len(failed)} problem(s) block normal use ({', '.join(failed)}); see FAIL above."
    if degraded:
        return (f"Storing and searching work, but {len(degraded)} check(s) warn ({', '.join(degraded)}): "
                "what they name does not work fully until fixed; see warn above.")
    return "All checks passed."


def _configure_logging(level: str) -> None:
    handler = logging.StreamHandler(sys.stderr)  # stdout carries the protocol
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    # The SDK logs every tool error's text at INFO; ours never quote user content, but the
    # SDK's own request logging stays at WARNING to keep the client's log file quiet.
    for name in ("mcp", "httpx", "httpcore"):
        logging.getLogger(name).setLevel(max(logging.WARNING, logging.getLevelName(level)))
