"""``python -m ollama_mcp`` and the ``ollama-mcp`` console script."""

import os

# OpenBLAS's worker threads (numpy's, on Linux and Windows) spin for ~0.1 s after each matrix
# product, on the same CPUs a local Ollama computes the next embedding on: that made every
# embedding call after a search ~20 ms slower with MiniLM on two cores (bench/README.md). 2^4
# cycles of spinning, then sleep. Set before numpy is first imported; the user's value wins.
os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")

import sys  # noqa: E402


def main() -> None:
    """The command line. ``hook`` goes straight to its own light module: Claude Code runs it on
    every prompt, and the rest of the command line costs ~40 ms of imports it does not use."""
    if sys.argv[1:2] == ["hook"]:
        from ollama_mcp.cli.hook_command import command  # noqa: PLC0415

        status = command(sys.argv[2:])
        if status is not None:
            sys.exit(status)
    from ollama_mcp.cli.main import main as full  # noqa: PLC0415

    full()


if __name__ == "__main__":
    main()
