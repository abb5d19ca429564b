"""The official MCP memory server's ``memory.jsonl``: a knowledge graph, one JSON object a line,
``{"type": "entity", "name", "entityType", "observations": [...]}`` or ``{"type": "relation",
"from", "to", "relationType"}``.

It becomes one conversation of notes, so its users can move over and search it: an observation
is a note "NAME (TYPE): observation", a relation a note "FROM RELATION TO", each with the entity or
relation in its metadata. A note's source id is its text, so an observation added later is one
new note, and importing the file again adds nothing."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from ollama_mcp import json_depth
from ollama_mcp.services.imports.chats import Chat, Skipped, Turn, clipped, json_lines

SOURCE_ID = "memory.jsonl"
TITLE = "Memories from the MCP memory server"


def graph(name: str, lines: Iterable[str | json_depth.Refused]) -> Iterator[Chat | Skipped]:
    notes: dict[str, Turn] = {}
    for read in json_lines(name, lines):
        if isinstance(read, Skipped):
            yield read
            continue
        number, entry = read
        where = f"{name} line {number}"
        kind = entry.get("type") if isinstance(entry, dict) else None
        if kind == "entity":
            entity, entity_type, observations = entry.get("name"), entry.get("entityType"), entry.get("observations")
            if not isinstance(entity, str) or not entity or not isinstance(observations, list):
                yield Skipped(where, "is an entity without a name or a list of observations")
                continue
            label = f"{entity} ({entity_type})" if isinstance(entity_type, str) and entity_type else entity
            for observation in observations:
                if isinstance(observation, str) and observation.strip():
                    text = clipped(f"{label}: {observation.strip()}")
                    notes[text] = Turn(text, "user", text, None, kind="note",
                                       metadata={"entity": entity, "entity_type": entity_type})
        elif kind == "relation":
            ends = entry.get("from"), entry.get("relationType"), entry.get("to")
            if not all(isinstance(v, str) and v for v in ends):
                yield Skipped(where, "is a relation without from, relationType and to")
                continue
            text = clipped(" ".join(str(v) for v in ends))
            notes[text] = Turn(text, "user", text, None, kind="note",
                               metadata={"from": ends[0], "relation": ends[1], "to": ends[2]})
        else:
            yield Skipped(where, "is neither an entity nor a relation")
    if notes:
        yield Chat("memory-server", SOURCE_ID, TITLE, None, list(notes.values()))
