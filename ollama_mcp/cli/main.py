"""The terminal surface: arguments, logging to stderr, and one handler turning errors into exit codes."""

from __future__ import annotations

import argparse
import gc
import logging
import os
import signal
import sys
from collections.abc import Sequence

from ollama_mcp.cli.arguments import parser
from ollama_mcp.cli.client_config import NAME as CLIENT_NAME
from ollama_mcp.cli.client_config import remote, render, write
from ollama_mcp.cli.client_files import merge_setting
from ollama_mcp.config import LOCAL_PRINCIPAL, Settings
from ollama_mcp.domain import Check
from ollama_mcp.errors import ConfigError, InvalidInputError, OllamaMcpError


def main(argv: Sequence[str] | None = None) -> None:
    args = parser().parse_args(argv)
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
    claude = args.client in ("claude-code", "claude-code-hooks")
    if args.cleanup_period_days is not None and not (args.write and claude):
        raise ConfigError("--cleanup-period-days goes with --write and --client claude-code or claude-code-hooks.")
    if args.cleanup_period_days is not None and not 1 <= args.cleanup_period_days <= 36_500:
        raise ConfigError(f"--cleanup-period-days {args.cleanup_period_days}: pass a number of days from 1 to 36500 "
                          "(365 keeps a year of transcripts).")
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
    if claude:
        _claude_transcripts(settings, args.cleanup_period_days)


def _claude_transcripts(settings: Settings, keep_days: int | None) -> None:
    """After Claude Code was configured: its setting raised when the user asked, then what its
    transcripts hold and how long they have (``services.claude_history``)."""
    from ollama_mcp.services import claude_history  # noqa: PLC0415  (kept off the serve path)

    if keep_days is not None:
        path = claude_history.claude_home(os.environ) / "settings.json"
        changed = merge_setting(path, "cleanupPeriodDays", keep_days)
        kept = f" (the previous file is kept as {changed.backup.name})" if changed.backup else ""
        print(f"set cleanupPeriodDays to {keep_days} in {path}{kept}" if changed.changed
              else f"{path} already sets cleanupPeriodDays to {keep_days}")
    said = claude_history.survey(settings, os.environ)
    if said is not None:
        print(said[1], file=sys.stderr)


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
        source, fmt = admin.import_source_of(args.file, args.history, args.format, os.environ)
        imported = anyio.run(
            admin.import_file, settings, source, fmt, args.since, args.dry_run, args.summarize,
            args.restore_deleted,
        )
        print(admin.import_summary(imported, settings.chat_calls_per_hour))
        # Everything in it was skipped (broken, or of no format imported): not a success.
        if imported.skipped and not (imported.turns or imported.new_conversations or imported.deleted_turns):
            print(f"{source}: nothing in it could be imported; see what was skipped above", file=sys.stderr)
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
                  f"{record.memory_id or '-'}" + (f"  redacted: {record.redacted}" if record.redacted else ""))
    elif args.command == "redact":
        if not args.scan:
            raise InvalidInputError("--scan", "is missing", "run `ollama-mcp redact --scan` to count the secrets "
                                    "already stored, and add --apply to replace them")
        print(admin.sweep_text(anyio.run(admin.redact_store, settings, args.apply)))
    elif args.command == "conflicts":
        reviewed, to_review, recent = anyio.run(
            admin.conflicts, settings, args.undo, args.confirm, max(1, args.limit))
        if reviewed is not None:
            print(f"{reviewed.state}: {reviewed.grounds}")
        print(admin.supersessions_text(to_review, recent))
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
