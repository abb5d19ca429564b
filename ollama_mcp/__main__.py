"""``python -m ollama_mcp`` and the ``ollama-mcp`` console script."""

import os

# OpenBLAS's worker threads (numpy's, on Linux and Windows) spin for ~0.1 s after each matrix
# product, on the same CPUs a local Ollama computes the next embedding on: that made every
# embedding call after a search ~20 ms slower with MiniLM on two cores (bench/README.md). 2^4
# cycles of spinning, then sleep. Set before numpy is first imported; the user's value wins.
os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")

from ollama_mcp.cli.main import main  # noqa: E402

if __name__ == "__main__":
    main()
