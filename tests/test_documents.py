"""Documents that match the code (#81 item 5): every file CONTRIBUTING.md names exists, and the
exception tree drawn in ``errors.py``'s docstring is the classes' own."""

from __future__ import annotations

import ast
import inspect
import re
import subprocess
from pathlib import Path

from ollama_mcp import errors

ROOT = Path(__file__).resolve().parent.parent


def test_every_file_contributing_names_exists_in_the_repository() -> None:
    text = (ROOT / "CONTRIBUTING.md").read_text()
    named = set(re.findall(r"`([\w./-]+\.(?:py|sql|toml|json))`", text)) | set(re.findall(r"`([\w/]+/)`", text))
    tracked = subprocess.run(["git", "-C", str(ROOT), "ls-files"], capture_output=True, text=True,
                             check=True).stdout.splitlines()
    tracked += sorted({str(Path(path).parent) for path in tracked})  # and their folders
    named = {name for name in named if "NNNN" not in name}  # (a migration's name as a template)
    missing = sorted(name for name in named if not any(
        path == name.rstrip("/") or path.endswith("/" + name.rstrip("/")) for path in tracked
    ))
    assert len(named) > 50 and missing == []


def test_the_error_tree_drawn_in_errors_py_is_the_classes_own() -> None:
    drawn: dict[str, str] = {}
    parents: list[tuple[int, str]] = []
    for line in (errors.__doc__ or "").splitlines():
        found = re.match(r"^(\s*(?:[│├└─]\s*)*)([A-Z]\w+)\b", line)
        if not found or not found.group(2).endswith(("Error", "Off", "Spent")):
            continue
        depth = len(found.group(1))
        while parents and parents[-1][0] >= depth:
            parents.pop()
        drawn[found.group(2)] = parents[-1][1] if parents else ""
        parents.append((depth, found.group(2)))
    actual = {
        name: ("" if cls is errors.OllamaMcpError else cls.__bases__[0].__name__)
        for name, cls in inspect.getmembers(errors, inspect.isclass)
        if issubclass(cls, errors.OllamaMcpError) and cls.__module__ == errors.__name__
    }
    assert drawn == actual


def test_no_test_module_imports_another_test_module() -> None:
    """Shared helpers live in tests/support/: a test file is read on its own, and moving or
    deleting one never breaks another."""
    crossing = sorted(
        f"{path.relative_to(ROOT)}: {line.strip()}"
        for path in (ROOT / "tests").rglob("*.py")
        for line in path.read_text().splitlines()
        if re.match(r"\s*(from|import) tests\.(\w+\.)*test_\w+", line)
    )
    assert crossing == []


MAX_MODULE_LINES = 500
LONGER_BECAUSE = "# longer than 500 lines:"


def test_no_package_module_is_over_500_lines_unless_it_says_why() -> None:
    """A module past MAX_MODULE_LINES holds more than one concept, or says in its own first lines
    (LONGER_BECAUSE) why it does not; a module back under the ceiling drops the reason."""
    over, stale = [], []
    for path in sorted((ROOT / "ollama_mcp").rglob("*.py")):
        lines = path.read_text().splitlines()
        granted = any(line.startswith(LONGER_BECAUSE) for line in lines[:40])
        if len(lines) > MAX_MODULE_LINES and not granted:
            over.append(f"{path.relative_to(ROOT)} ({len(lines)} lines)")
        if len(lines) <= MAX_MODULE_LINES and granted:
            stale.append(str(path.relative_to(ROOT)))
    assert (over, stale) == ([], [])


def test_every_test_name_reads_as_one_sentence_of_at_most_15_words() -> None:
    """A name longer than that is two tests, or a docstring's job."""
    long = sorted(
        f"{path.relative_to(ROOT)}::{node.name}"
        for path in (ROOT / "tests").rglob("test_*.py")
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and node.name.startswith("test_") and len(node.name.removeprefix("test_").split("_")) > 15
    )
    assert long == []
