"""The terminal surface: arguments, logging to stderr, and one handler turning errors into exit codes."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

from ollama_mcp import __version__
from ollama_mcp.config import Settings
from ollama_mcp.errors import OllamaMcpError


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
    commands.add_parser("serve", help="serve MCP over stdin/stdout (the default)")
    commands.add_parser(
        "doctor",
        help="check the database, SQLite, Ollama and the embedding model, and say how to fix what fails",
        description="Checks what normal use needs and prints one line per check with the fix for each "
        "failure. Changes nothing. Exit code 1 when something blocks normal use.",
    )
    commands.add_parser(
        "stats",
        help="show conversations, memories, pending embeddings, vectors per model and the database size",
        description="Prints what the database holds. Read-only; needs no Ollama.",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> None:
    args = _parser().parse_args(argv)
    try:
        settings = Settings.from_env()
        _configure_logging(settings.log_level)
        if args.command in (None, "serve"):
            _serve(settings)
        elif args.command == "doctor":
            sys.exit(_doctor(settings))
        elif args.command == "stats":
            from ollama_mcp.doctor import stats  # noqa: PLC0415  (kept off the serve path)

            for label, value in stats(settings):
                print(f"{label:<14} {value}")
    except OllamaMcpError as exc:
        print(f"ollama-mcp: {exc}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:
        sys.exit(130)


def _serve(settings: Settings) -> None:
    from ollama_mcp.server import build_server  # noqa: PLC0415  (the CLI's other commands need no MCP)

    logging.getLogger(__name__).info("serving MCP over stdio; database %s", settings.db_path)
    build_server(settings).run("stdio")


def _doctor(settings: Settings) -> int:
    import anyio  # noqa: PLC0415  (kept off the serve path)

    from ollama_mcp.doctor import run_checks  # noqa: PLC0415

    checks = anyio.run(run_checks, settings)
    for check in checks:
        mark = "ok  " if check.ok else ("FAIL" if check.blocking else "warn")
        print(f"{mark} {check.name:<12} {check.detail}")
    failed = [c for c in checks if not c.ok and c.blocking]
    print("\nAll checks passed." if not failed else f"\n{len(failed)} problem(s) block normal use; see FAIL above.")
    return 1 if failed else 0


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
