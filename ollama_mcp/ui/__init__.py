"""The browser view of the memory (``ollama-mcp ui``): see what the assistant remembered, search
it, correct or delete memories, end, export and import conversations, and check the health of the
store and Ollama. ``guard`` keeps it to one person, ``web`` holds the pages, ``views`` what they
compute, ``run`` serves it on a loopback port."""
