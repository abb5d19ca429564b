"""How much of the two storage backends is the same code, and whether that share is under the bar.

The measure: every non-blank, non-comment line of ``ollama_mcp/storage/sqlite/*.py`` and of
``ollama_mcp/storage/postgres/*.py``, stripped of indentation, with PostgreSQL's ``%s`` placeholders
written as SQLite's ``?``. The share is the size of the two multisets' intersection, counted on both
sides, over the sum of their sizes: 0% when no line repeats, 100% when the folders are copies.

Run ``python .ci/backend_overlap.py`` for the share and the files that contribute most;
``--max 15`` makes it exit 1 above 15%. Lines such as ``return rows`` or ``)`` repeat in any two
Python folders, so the floor is not zero.
"""

from __future__ import annotations

import argparse
import collections
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent / "ollama_mcp" / "storage"


def lines(path: pathlib.Path) -> list[str]:
    kept = []
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if line and not line.startswith("#"):
            kept.append(line.replace("%s", "?"))
    return kept


def folder(name: str) -> dict[str, collections.Counter[str]]:
    return {p.name: collections.Counter(lines(p)) for p in sorted((ROOT / name).glob("*.py"))}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max", type=float, help="fail above this share, in percent")
    args = parser.parse_args()
    sqlite, postgres = folder("sqlite"), folder("postgres")
    left = sum(sqlite.values(), collections.Counter())
    right = sum(postgres.values(), collections.Counter())
    common = left & right
    share = 100 * 2 * sum(common.values()) / (sum(left.values()) + sum(right.values()))
    print(f"identical-line share between storage/sqlite and storage/postgres: {share:.1f}%")
    print(f"  ({sum(common.values())} shared lines; sqlite {sum(left.values())}, postgres {sum(right.values())})")
    per_file = []
    for name in sorted(set(sqlite) | set(postgres)):
        a, b = sqlite.get(name, collections.Counter()), postgres.get(name, collections.Counter())
        per_file.append((sum((a & b).values()), name))
    for count, name in sorted(per_file, reverse=True)[:8]:
        if count:
            print(f"  {name:<18} {count} lines shared with its namesake")
    if args.max is not None and share > args.max:
        print(f"over the bar of {args.max:.0f}%: write the agreeing SQL once in storage/sql", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
