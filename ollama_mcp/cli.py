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
    return parser


def main(argv: Sequence[str] | None = None) -> None:
    args = _parser().parse_args(argv)
    try:
        settings = Settings.from_env()
        _configure_logging(settings.log_level)
        if args.command in (None, "serve"):
            _serve(settings)
    except OllamaMcpError as exc:
        print(f"ollama-mcp: {exc}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:
        sys.exit(130)


def _serve(settings: Settings) -> None:
    from ollama_mcp.server import build_server  # noqa: PLC0415  (the CLI's other commands need no MCP)

    logging.getLogger(__name__).info("serving MCP over stdio; database %s", settings.db_path)
    build_server(settings).run("stdio")


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
