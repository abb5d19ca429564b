"""Opening what a user hands to ``ollama-mcp import`` (or the browser view's Import page) and
telling its format from its content.

Read as a stream, so memory stays bounded however large the export: a JSON list is parsed one
conversation at a time (ijson, yajl's C parser: a ChatGPT export can be hundreds of MB, and
``json.load`` would hold all of it and its objects at once), a ``.jsonl`` one line at a time, a
zip's member without extracting it. Nothing here writes; every refusal is an
``InvalidInputError`` naming the file and what was expected.
"""

from __future__ import annotations

import io
import json
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import IO, Any

from ollama_mcp import json_depth
from ollama_mcp.errors import InvalidInputError
from ollama_mcp.services.imports import chatgpt, claude_ai, claude_code, claude_memory, codex, gemini, memory_server
from ollama_mcp.services.imports.chats import MAX_TURN_CHARS, Chat, Skipped
from ollama_mcp.services.imports.formats import EXPECTED, FORMAT_NAMES, FORMATS
from ollama_mcp.services.imports.long_strings import CHUNK_BYTES, ClippedStrings

FIELD = "FILE"
FIRST_LINE_BYTES = 1 << 20
# A JSON string longer than this is cut here while the file streams by (``long_strings``): a turn
# keeps its first MAX_TURN_CHARS characters anyway, which take at most this many bytes (\uXXXX each).
STRING_BYTES = 6 * MAX_TURN_CHARS + 64
LINE_BYTES = 64 << 20  # a JSON line longer than this once its strings are cut is skipped
# A zip member that expands more than this many times its compressed size, to more than
# BOMB_BYTES, is refused: exports compress 5-20 times; a zip bomb, a thousand.
MAX_EXPANSION = 200
BOMB_BYTES = 64 << 20


@dataclass(frozen=True)
class _At:
    """What errors call the input: the field (FILE on the command line, file in the browser view)
    and the file's name as its user knows it."""

    field: str
    shown: str


@dataclass
class Source:
    """An opened import: its format, the chats it holds (read lazily, once), and how far through
    its bytes the reading is (for a progress bar). A context manager: leaving it closes the file."""

    format: str
    chats: Iterator[Chat | Skipped]
    size: int
    position: Callable[[], int]
    document: object = None  # an ollama-mcp export, read whole (its own format, bounded by export)
    close: Callable[[], None] = lambda: None

    def __enter__(self) -> Source:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


def open_source(path: Path, fmt: str | None = None, *, field: str = FIELD, shown: str | None = None) -> Source:
    """The import ``path`` names (a file or a Claude Code projects folder), in ``fmt`` or the
    format its content shows. Errors name ``field`` and call the file ``shown`` (default: its name)."""
    if fmt is not None and fmt not in FORMATS:
        raise InvalidInputError("--format", f"is {fmt!r}", f"pass one of {', '.join(FORMATS)}")
    at = _At(field, shown or (str(path) if path.is_dir() else path.name))
    if path.is_dir():
        if fmt not in (None, *SESSION_FOLDERS):
            raise refusal(at, "is a folder", "pass a file, or a folder of Claude Code, Codex or Gemini CLI sessions")
        return _session_folder(path, at, fmt)
    try:
        handle = path.open("rb", buffering=1 << 20)
    except OSError as exc:
        raise refusal(at, f"cannot be read ({exc.strerror})") from None
    try:
        source = _opened(path, handle, fmt, at)
    except BaseException:
        handle.close()  # refused: nothing stays open
        raise
    source.close = handle.close
    return source


def _opened(path: Path, handle: IO[bytes], fmt: str | None, at: _At) -> Source:
    size = path.stat().st_size
    head = handle.read(4096)
    handle.seek(0)
    if not head.strip():
        raise refusal(at, "is empty")
    is_zip = head.startswith(b"PK")
    suffix = path.suffix.lower()
    if suffix == ".zip" and not is_zip:
        raise refusal(at, "ends in .zip but is not a zip archive", "pass the export as downloaded")
    if suffix in (".json", ".jsonl") and is_zip:
        raise refusal(at, f"ends in {suffix} but is a zip archive", "rename it to .zip")
    if is_zip:
        return _zip(handle, size, fmt, at)
    return _stream(at, handle, size, handle.tell, fmt, suffix)


def _stream(at: _At, raw: IO[bytes], size: int, position: Callable[[], int], fmt: str | None,
            suffix: str) -> Source:
    name = at.shown
    # The first line, at most 1 MB of it (a minified export is one line of all of it).
    # (Its strings cut as the import cuts them: a session whose first turn is huge is still one.)
    head = io.BufferedReader(ClippedStrings(raw, STRING_BYTES)).readline(FIRST_LINE_BYTES).lstrip(b"\xef\xbb\xbf")
    raw.seek(0)
    first = head.lstrip(b" \t\r\n")[:1]
    if first == b"[":
        if suffix == ".jsonl":
            raise refusal(at, "ends in .jsonl but holds a JSON list", "rename it to .json")
        return _json_list(at, raw, size, position, fmt)
    if first != b"{":
        raise refusal(at, "is not JSON or JSON lines")
    try:
        entry: Any = json_depth.loads(head.decode("utf-8", errors="replace"))  # a stray latin-1 byte: one turn
    except json_depth.TooDeep as exc:
        raise refusal(at, f"has a first line {exc}") from None
    except json.JSONDecodeError:
        entry = None  # a JSON document over several lines: our own export, if anything
    if isinstance(entry, dict) and fmt != "ollama-mcp":
        kind = fmt or _line_format(entry)
        if kind == "memory-server":
            return Source(kind, memory_server.graph(name, _lines(raw)), size, position)
        if kind == "claude-code":
            return Source(kind, claude_code.session(name, _lines(raw)), size, position)
        if kind == "codex":
            return Source(kind, codex.session(name, _lines(raw)), size, position)
        if kind == "gemini" and (suffix == ".jsonl" or not isinstance(entry.get("messages"), list)):
            return Source(kind, gemini.session(name, _lines(raw)), size, position)
    if suffix == ".jsonl":
        raise refusal(at, "is not a Claude Code, Codex or Gemini CLI session, or a memory.jsonl")
    try:
        document = json_depth.loads(io.TextIOWrapper(raw, encoding="utf-8-sig").read())
    except json_depth.TooDeep as exc:
        raise refusal(at, f"is {exc}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise refusal(at, f"is not valid JSON ({exc})") from None
    if isinstance(document, dict) and fmt in (None, "gemini") and _line_format(document) == "gemini":
        return Source("gemini", gemini.record(document), size, position)
    ours = isinstance(document, dict) and document.get("format") == "ollama-mcp-export"
    if fmt not in (None, "ollama-mcp") or not ours:
        raise refusal(at, "is a JSON object of no format ollama-mcp imports")
    return Source("ollama-mcp", iter(()), size, position, document=document)


def _json_list(at: _At, raw: IO[bytes], size: int, position: Callable[[], int], fmt: str | None) -> Source:
    import ijson  # type: ignore[import-untyped]  # noqa: PLC0415 - only an import needs the streaming parser

    _within_depth(at, raw)
    items = ijson.items(ClippedStrings(raw, STRING_BYTES), "item", use_float=True)
    # The format is told by the first of the first few conversations that shows one: a broken
    # first conversation is skipped with its reason, as it would be anywhere else in the list.
    looked: list[object] = []
    kind = fmt
    try:
        while kind is None and len(looked) < FORMAT_LOOKAHEAD and (item := next(items, _END)) is not _END:
            looked.append(item)
            kind = _list_format(item) if _list_format(item) != "unknown" else None
    except ijson.JSONError as exc:
        raise refusal(at, f"is not valid JSON ({_first_line(exc)})") from None
    kind = kind or ("chatgpt" if not looked else None)
    if kind not in ("chatgpt", "claude.ai"):
        raise refusal(at, "holds a list of no format ollama-mcp imports")
    reader = chatgpt.chats if kind == "chatgpt" else claude_ai.chats
    return Source(kind, _guarded(at, reader(_chain(looked, items))), size, position)


FORMAT_LOOKAHEAD = 20  # conversations read to tell the format of a list
_END = object()


def _first_line(exc: Exception) -> str:
    """A parser's complaint without the dump of the text around it that follows its first line."""
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


def _within_depth(at: _At, raw: IO[bytes]) -> None:
    """Refuse a JSON list nested deeper than ``json_depth.MAX_DEPTH`` before reading it for its
    conversations. ijson's ``items`` keeps each event's path as a string, so 100,000 nested ``[``
    (a 200 KB upload) cost it time and memory by the square of the depth (4 GB, then a 500 on the
    shared server); its path-less events (``basic_parse``, C) find the depth in one pass at about
    the cost of the import's own parse. The file is read again from its start afterwards."""
    import ijson  # noqa: PLC0415

    depth = 0
    try:
        for event, _ in ijson.basic_parse(ClippedStrings(raw, STRING_BYTES)):
            if event == "start_array" or event == "start_map":
                depth += 1
                if depth > json_depth.MAX_DEPTH:
                    raise refusal(at, f"is nested deeper than {json_depth.MAX_DEPTH} levels, which no export is")
            elif event == "end_array" or event == "end_map":
                depth -= 1
    except ijson.JSONError:
        pass  # a file that breaks off: the import itself says where, after what came before the break
    raw.seek(0)


def refusal(at: _At, problem: str, fix: str = f"pass {EXPECTED}") -> InvalidInputError:
    """The error for input ``at``: its field, its name, what is wrong and what to do."""
    return InvalidInputError(at.field, f"{at.shown} {problem}", fix)


def _list_format(first: object) -> str:
    if isinstance(first, dict) and "mapping" in first:
        return "chatgpt"
    if isinstance(first, dict) and "chat_messages" in first:
        return "claude.ai"
    return "unknown"


def _line_format(entry: dict[str, Any]) -> str | None:
    if entry.get("type") in ("entity", "relation"):
        return "memory-server"
    if "sessionId" in entry and "projectHash" in entry:
        return "gemini"
    if entry.get("type") in ("session_meta", "response_item", "turn_context", "event_msg") and "payload" in entry:
        return "codex"
    if "sessionId" in entry or entry.get("type") in ("user", "assistant", "summary", "system"):
        return "claude-code"
    return None


def _chain(first: list[object], rest: Iterator[object]) -> Iterator[object]:
    yield from first
    yield from rest


def _guarded(at: _At, chats: Iterator[Chat | Skipped]) -> Iterator[Chat | Skipped]:
    """A JSON list that breaks off (a truncated download) ends the import with an error, after the
    conversations before the break: those are whole, and importing the file again adds nothing."""
    import ijson  # noqa: PLC0415

    try:
        yield from chats
    except ijson.JSONError as exc:
        raise refusal(
            at, f"breaks off or is not valid JSON ({_first_line(exc)})",
            "download the export again and import it again",
        ) from None


def _zip(handle: IO[bytes], size: int, fmt: str | None, at: _At) -> Source:
    try:
        archive = zipfile.ZipFile(handle)
        names = archive.namelist()
    except (zipfile.BadZipFile, OSError) as exc:
        raise refusal(at, f"is not a complete zip archive ({exc})", "download the export again") from None
    escaping = [n for n in names if PurePosixPath(n).is_absolute() or ".." in PurePosixPath(n).parts or "\\" in n]
    if escaping:
        raise refusal(at, f"holds paths outside its own folder ({escaping[0]!r})", "import an export as downloaded")
    member = next((n for n in names if PurePosixPath(n).name == "conversations.json"), None)
    if member is None:
        raise refusal(at, "holds no conversations.json")
    info = archive.getinfo(member)
    if info.file_size > BOMB_BYTES and info.file_size > MAX_EXPANSION * max(info.compress_size, 1):
        raise refusal(
            at, f"holds a {member} of {info.file_size:,} bytes packed into {info.compress_size:,}, which no export"
            " compresses to (a zip bomb)", "import the export as downloaded",
        )
    try:
        stream = archive.open(info)
    except (zipfile.BadZipFile, OSError) as exc:
        raise refusal(at, f"cannot be read ({exc})", "download the export again") from None
    return _stream(_At(at.field, f"{at.shown}:{member}"), stream, info.file_size, stream.tell, fmt, ".json")


# Which files of a folder are sessions, for each client that keeps them in folders.
SESSION_FOLDERS = {"claude-code": "*.jsonl", "codex": "rollout-*.jsonl", "gemini": "session-*.json*"}


def _session_folder(folder: Path, at: _At, fmt: str | None) -> Source:
    """Every session in ``folder`` (and below), read one file at a time: a Claude Code projects
    folder, Codex's sessions folder or Gemini CLI's tmp folder (``fmt``, or what its files show)."""
    kind = fmt or next((k for k in ("codex", "gemini") if next(folder.rglob(SESSION_FOLDERS[k]), None)), "claude-code")
    files = sorted(f for f in folder.rglob(SESSION_FOLDERS[kind]) if f.is_file() and f.suffix in (".json", ".jsonl"))
    if not files:
        raise refusal(at, f"holds no {FORMAT_NAMES[kind]} files", f"pass the folder {FORMAT_NAMES[kind]} are in")
    sizes = [f.stat().st_size for f in files]
    done = [0]

    def sessions() -> Iterator[Chat | Skipped]:
        for file, size in zip(files, sizes, strict=True):
            name = str(file.relative_to(folder))
            with file.open("rb") as raw:
                if kind == "codex":
                    yield from codex.session(name, _lines(raw))
                elif kind == "gemini" and file.suffix == ".json":  # a session of Gemini CLI before 0.4x, whole
                    yield from _gemini_record(name, raw, _project_root(file))
                elif kind == "gemini":
                    yield from gemini.session(name, _lines(raw), _project_root(file))
                else:
                    yield from claude_code.session(name, _lines(raw))
            done[0] += size
        if kind == "claude-code":  # its own memory files, read-only (claude_memory)
            yield from claude_memory.notes(folder)

    return Source(kind, sessions(), sum(sizes), lambda: done[0])


def _gemini_record(name: str, raw: IO[bytes], project_root: str | None) -> Iterator[Chat | Skipped]:
    """A ``.json`` session of Gemini CLI, read whole as Gemini CLI reads it."""
    try:
        document = json_depth.loads(io.TextIOWrapper(raw, encoding="utf-8-sig").read())
    except (json_depth.Refused, json.JSONDecodeError, UnicodeDecodeError) as exc:
        yield Skipped(name, f"is not a Gemini CLI session ({exc})")
        return
    if isinstance(document, dict):
        yield from gemini.record(document, project_root)


def _project_root(session_file: Path) -> str | None:
    """The project a Gemini CLI session is of: ``<project>/.project_root`` beside its ``chats``."""
    marker = session_file.parent.parent / ".project_root"
    try:
        text = marker.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None
    return text if text.startswith("/") or (len(text) > 2 and text[1] == ":") else None


def _lines(raw: IO[bytes]) -> Iterator[str | json_depth.TooLarge]:
    """The lines of a JSON lines file, their strings cut at ``STRING_BYTES``; a line still longer
    than ``LINE_BYTES`` (not made of strings) is read past, in bounded memory, and named."""
    lines = io.BufferedReader(ClippedStrings(raw, STRING_BYTES), CHUNK_BYTES)
    while line := lines.readline(LINE_BYTES):
        if len(line) == LINE_BYTES and not line.endswith(b"\n"):
            while (more := lines.readline(LINE_BYTES)) and not more.endswith(b"\n"):
                pass
            yield json_depth.TooLarge(f"longer than {LINE_BYTES >> 20} MB after its texts were cut, which no export is")
            continue
        yield line.decode("utf-8", errors="replace")
