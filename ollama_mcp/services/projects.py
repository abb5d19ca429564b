"""Which project a working directory belongs to, decided without the model: the root of its git
repository, where a linked worktree counts as its main repository (so two windows on two
branches of one repository are one project); outside git, the folder itself. Read from the
files git keeps (``.git`` as a folder, or a file naming the worktree's git folder and its
``commondir``), without running git."""

from __future__ import annotations

import os
from pathlib import Path


def project_of(cwd: str) -> str:
    """The project of ``cwd``: its repository's root, else ``cwd`` itself (also when it does not
    exist here, as in a transcript imported from another machine)."""
    try:
        start = Path(os.path.abspath(cwd))
        for folder in (start, *start.parents):
            git = folder / ".git"
            if git.is_dir():
                return str(folder)
            if git.is_file():
                return str(_main_repository(git) or folder)
    except OSError:
        pass
    return os.path.normpath(cwd) if cwd else cwd


def _main_repository(git_file: Path) -> Path | None:
    """The main repository of a linked worktree whose ``.git`` file is ``git_file``; None for one
    that is not a worktree's (a submodule's, say), which is its own project."""
    line = git_file.read_text(encoding="utf-8", errors="replace").strip()
    if not line.startswith("gitdir:"):
        return None
    gitdir = Path(line.removeprefix("gitdir:").strip())
    if not gitdir.is_absolute():
        gitdir = git_file.parent / gitdir
    common = gitdir / "commondir"
    if not common.is_file():
        return None
    common_dir = Path(common.read_text(encoding="utf-8").strip())
    if not common_dir.is_absolute():
        common_dir = gitdir / common_dir
    common_dir = Path(os.path.normpath(common_dir))
    return common_dir.parent if common_dir.name == ".git" else None
