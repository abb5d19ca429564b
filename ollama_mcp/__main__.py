"""``python -m ollama_mcp`` and the ``ollama-mcp`` console script."""

from ollama_mcp.cli import main

if __name__ == "__main__":
    main()
