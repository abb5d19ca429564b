"""The house's figures (#81): parameters typed ``object`` (in services/ and in all), the largest
modules, and the service classes with the most public methods. A report, not a check: the checks
are tests/test_documents.py's and .importlinter's. Run from a checkout:
``python .ci/house_figures.py`` (or on another tree: ``python .ci/house_figures.py /tmp/old``)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path


def main(root: Path) -> None:
    package = root / "ollama_mcp"
    params = {"services": 0, "all": 0}
    signatures = {"services": 0, "all": 0}
    public_taking_object = 0
    widest: list[tuple[int, str]] = []
    for path in sorted(package.rglob("*.py")):
        tree = ast.parse(path.read_text())
        in_services = "services" in path.relative_to(package).parts
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                args = node.args.posonlyargs + node.args.args + node.args.kwonlyargs
                typed = sum(1 for a in args if a.annotation is not None and ast.unparse(a.annotation) == "object")
                if typed:
                    for where in ("all", "services") if in_services else ("all",):
                        params[where] += typed
                        signatures[where] += 1
        if in_services:
            for node in tree.body:
                if isinstance(node, ast.ClassDef):
                    methods = [f for f in node.body if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef)
                               and not f.name.startswith("_")]
                    widest.append((len(methods), f"{path.relative_to(root)}:{node.name}"))
                    public_taking_object += sum(
                        1 for f in methods
                        if any(a.annotation is not None and ast.unparse(a.annotation) == "object"
                               for a in f.args.args + f.args.kwonlyargs)
                    )
    sizes = sorted(((len(p.read_text().splitlines()), str(p.relative_to(root))) for p in package.rglob("*.py")),
                   reverse=True)
    print(f"object parameters: services {params['services']} in {signatures['services']} signatures, "
          f"all {params['all']} in {signatures['all']}; public service methods taking one: {public_taking_object}")
    print("largest modules:", ", ".join(f"{name} {lines}" for lines, name in sizes[:3]),
          f"({sum(1 for lines, _ in sizes if lines > 500)} over 500)")
    print("widest services:", ", ".join(f"{name} {n}" for n, name in sorted(widest, reverse=True)[:4]))


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parents[1])
