"""Which project a working directory is, decided from git's own files, with real repositories."""

from __future__ import annotations

import subprocess
from pathlib import Path

from ollama_mcp.services.projects import project_of


def git(folder: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(folder), "-c", "user.name=t", "-c", "user.email=t@t", *args], check=True,
                   capture_output=True)


def test_repository_folders_linked_worktrees_and_folders_outside_git_resolve_to_their_projects(
    tmp_path: Path,
) -> None:
    repo = tmp_path / "shop"
    (repo / "src" / "api").mkdir(parents=True)
    git(repo, "init", "-q")
    git(repo, "commit", "-q", "--allow-empty", "-m", "start")
    git(repo, "worktree", "add", "-q", str(tmp_path / "shop-feature"))
    (tmp_path / "shop-feature" / "docs").mkdir()
    plain = tmp_path / "notes"
    plain.mkdir()

    assert project_of(str(repo / "src" / "api")) == str(repo)
    assert project_of(str(tmp_path / "shop-feature" / "docs")) == str(repo)  # two windows, one project
    assert project_of(str(plain)) == str(plain)
    assert project_of(str(tmp_path / "gone" / "away")) == str(tmp_path / "gone" / "away")  # another machine's
    assert project_of(str(repo / "src" / "..")) == str(repo)


def test_a_submodule_is_its_own_project(tmp_path: Path) -> None:
    module = tmp_path / "app" / "vendor" / "lib"
    module.mkdir(parents=True)
    (tmp_path / "app" / ".git" / "modules" / "lib").mkdir(parents=True)
    (module / ".git").write_text("gitdir: ../../.git/modules/lib\n")
    assert project_of(str(module)) == str(module)
