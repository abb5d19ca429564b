"""``ollama-mcp hook [EVENT]``, the command Claude Code runs, kept light: it imports the payload
checks and the spool only, so a prompt or a reply is handed on (``hook_spool``) in about the time
of a bare Python start; ``SessionStart`` and ``SessionEnd``, and a turn the spool cannot take,
are recorded here and now (``hooks``). ``__main__`` routes ``hook`` here before the rest of the
command line is imported.

Whatever fails, the process exits 0 with one line on stderr and nothing recorded: a hook must not
block the editor. Only a command line that names no event Claude Code has exits 1 (shown to the
user as a hook error, which does not block either; exit 2 would).
"""

from __future__ import annotations

import logging
import sys

from ollama_mcp.cli.hook_payload import EVENTS, HOOK_CLIENTS, HookCall, HookError, event_name, parse
from ollama_mcp.cli.hook_spool import SPOOLED, folder_for, put, start_drainer
from ollama_mcp.config import Settings
from ollama_mcp.errors import OllamaMcpError

DRAIN = "--drain"  # the detached drainer's own command line (hook_spool.start_drainer)


def command(argv: list[str]) -> int | None:
    """Run ``ollama-mcp hook`` for these arguments (after ``hook``); None when they are not a
    hook's (``--help``, a typo'd option): the full command line then says what they mean."""
    if argv == [DRAIN]:
        return drain()
    client = "claude-code"
    if argv[:1] == ["--client"] and len(argv) >= 2 and argv[1] in HOOK_CLIENTS:
        client, argv = argv[1], argv[2:]
    if len(argv) > 1 or (argv and argv[0].startswith("-")):
        return None
    # Errors only: the editor's stderr is not a log.
    logging.basicConfig(level=logging.ERROR, stream=sys.stderr, format="ollama-mcp: %(message)s")
    settings: Settings | OllamaMcpError
    try:
        settings = Settings.from_env()
    except OllamaMcpError as exc:  # said by the hook, which exits 0: a hook must not block the editor
        settings = exc
    return main(argv[0] if argv else None, settings, sys.stdin.buffer.read(), client)


def main(
    given_event: str | None, settings: Settings | OllamaMcpError, stdin: bytes, client: str = "claude-code"
) -> int:
    """The hook for the payload ``stdin``: the exit status; stdout only as the hook protocol reads it."""
    event = event_name(given_event)
    if given_event is not None and event is None:
        print(f"ollama-mcp hook: {given_event!r} is not a Claude Code event this handles; use one of "
              f"{', '.join(EVENTS)}", file=sys.stderr)
        return 1  # a mistake in the settings file, not in a payload: Claude Code shows it, and does not block
    try:
        call = parse(event, stdin, client)
        if isinstance(settings, OllamaMcpError):
            raise settings
        if call.event in SPOOLED:
            if call.turn is None:
                return 0  # a Stop after tool calls only: nothing was said
            if handed_on(settings, call):
                return 0
        from ollama_mcp.cli import hooks  # noqa: PLC0415 - the store, only when it is needed now

        output = hooks.record(settings, call)
    except (HookError, OllamaMcpError) as exc:
        print(f"ollama-mcp hook {event or ''}: nothing recorded: {exc}".replace("  ", " "), file=sys.stderr)
        return 0
    except TimeoutError:
        print(f"ollama-mcp hook {event}: nothing recorded: the store did not answer in time", file=sys.stderr)
        return 0
    except Exception as exc:  # a bug must not block the editor either
        print(f"ollama-mcp hook {event or ''}: nothing recorded: unexpected {type(exc).__name__}: {exc}",
              file=sys.stderr)
        return 0
    sys.stdout.write(output)
    return 0


def handed_on(settings: Settings, call: HookCall) -> bool:
    """Spool the turn and start a drainer: True once the turn is safely in the spool and will be
    recorded. False when the spool cannot be written (the caller records it now); a turn spooled
    whose drainer cannot start is recorded now from the spool."""
    folder = folder_for(settings)
    try:
        put(folder, call)
    except OSError:
        return False
    try:
        start_drainer()
    except OSError:
        from ollama_mcp.cli import hooks  # noqa: PLC0415

        hooks.record(settings, None)
    return True


def drain() -> int:
    """The detached drainer: record what waits in the spool. It has no one to tell of a failure;
    what it could not record stays in the spool for the next SessionStart or SessionEnd."""
    try:
        from ollama_mcp.cli import hooks  # noqa: PLC0415

        hooks.record(Settings.from_env(), None)
    except Exception:  # noqa: BLE001, S110 - detached: nobody reads its output, and the turns are kept
        pass
    return 0
