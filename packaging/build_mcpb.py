"""Build the Claude Desktop bundle ``ollama-mcp-<version>.mcpb`` with the official MCPB CLI.

    python packaging/build_mcpb.py [--out dist]

Needs the CLI installed beside the repository (``npm install --no-save @anthropic-ai/mcpb@2.1.2``,
as .ci/run does). The bundle is built from what git tracks, so its version names exactly what it
holds: a tree with uncommitted changes in what the bundle carries is refused, and so is a manifest
whose version is not the package's.

The bundle is of the manifest's ``uv`` type (MCPB 0.4): it carries the source and pyproject.toml,
no interpreter and no packages; Claude Desktop runs ``uv run --directory <bundle> ollama-mcp``,
which installs Python and the dependencies itself, so users need no Python of their own (the
alternative, a ``python`` bundle, must vendor compiled packages such as pydantic and numpy for
every platform).

Beside the bundle it writes ``server.json`` for the MCP registry: the repository's entry plus the
bundle, with its release address and SHA-256 (which exists only once the bundle is built).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MANIFEST = Path("packaging/mcpb/manifest.json")
ICON = Path("packaging/mcpb/icon.png")
# What the bundle carries besides its manifest and icon: what `uv run` needs to build and run the
# package (pyproject.toml names README.md and LICENSE), and the lock it installs from without
# resolving (`uv run --frozen`: a first start only downloads).
CARRIED = ("pyproject.toml", "uv.lock", "README.md", "LICENSE", "ollama_mcp")
RELEASES = "https://github.com/ollama-mcp/ollama-mcp/releases/download"


class Refused(Exception):
    """The bundle cannot be built as asked; the message says why and what to do."""


def _git(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, check=True).stdout


def check_clean(root: Path) -> None:
    paths = [*CARRIED, str(MANIFEST), str(ICON)]
    changed = _git(root, "status", "--porcelain", "--", *paths).splitlines()
    if changed:
        names = ", ".join(line[3:] for line in changed[:5]) + (" …" if len(changed) > 5 else "")
        raise Refused(
            f"the working tree has uncommitted changes in what the bundle carries ({names}); commit or "
            "stash them first: a bundle is built from a commit, so that its version names what it holds."
        )


def versions(root: Path) -> tuple[str, str]:
    """(the package's version, the manifest's version)."""
    package = tomllib.loads((root / "pyproject.toml").read_text())["project"]["version"]
    manifest = json.loads((root / MANIFEST).read_text())["version"]
    return package, manifest


def check_version(root: Path) -> str:
    package, manifest = versions(root)
    if package != manifest:
        raise Refused(
            f"{MANIFEST} says version {manifest} but pyproject.toml says {package}; set the manifest's "
            "version to the package's."
        )
    return package


def stage(root: Path, into: Path) -> None:
    """The bundle's tree: the manifest and icon at its top, then the tracked files it carries."""
    shutil.copy2(root / MANIFEST, into / "manifest.json")
    shutil.copy2(root / ICON, into / "icon.png")
    for name in _git(root, "ls-files", "-z", "--", *CARRIED).split("\0"):
        if name:
            (into / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(root / name, into / name)


def mcpb(*args: str) -> None:
    """The official CLI, as npm installed it beside the repository (never fetched on the fly)."""
    done = subprocess.run(["npx", "--no-install", "mcpb", *args], cwd=ROOT, capture_output=True, text=True)
    if done.returncode != 0:
        raise Refused(f"mcpb {args[0]} failed:\n{done.stdout}{done.stderr}".rstrip())


def registry_entry(root: Path, version: str, bundle: Path) -> dict[str, object]:
    """server.json with the bundle as a second package: its release address and SHA-256."""
    entry = json.loads((root / "server.json").read_text())
    entry["packages"].append({
        "registryType": "mcpb",
        "identifier": f"{RELEASES}/v{version}/{bundle.name}",
        "version": version,
        "fileSha256": hashlib.sha256(bundle.read_bytes()).hexdigest(),
        "transport": {"type": "stdio"},
    })
    return entry


def build(root: Path, out: Path) -> Path:
    check_clean(root)
    version = check_version(root)
    out.mkdir(parents=True, exist_ok=True)
    bundle = out.resolve() / f"ollama-mcp-{version}.mcpb"
    with tempfile.TemporaryDirectory(prefix="ollama-mcp-bundle-") as tmp:
        staged = Path(tmp) / "ollama-mcp"
        staged.mkdir()
        stage(root, staged)
        mcpb("validate", str(staged / "manifest.json"))
        mcpb("pack", str(staged), str(bundle))
    (out / "server.json").write_text(json.dumps(registry_entry(root, version, bundle), indent=2) + "\n")
    return bundle


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "dist", help="where the bundle goes (default: dist)")
    parser.add_argument("--source", type=Path, default=ROOT, help="the repository to build from")
    args = parser.parse_args(argv)
    try:
        bundle = build(args.source.resolve(), args.out)
    except Refused as refused:
        print(f"build_mcpb: refused: {refused}", file=sys.stderr)
        return 1
    print(f"{bundle} ({bundle.stat().st_size:,} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
