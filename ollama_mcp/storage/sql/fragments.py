"""SQL fragments and value helpers both SQL backends use: a memory's neighbours and moments as
columns, compact JSON, and a text matched literally by LIKE."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ollama_mcp.when import times_named

if TYPE_CHECKING:
    from ollama_mcp.storage.sql.dialect import Dialect


def neighbour_columns(d: Dialect) -> str:
    """A memory's neighbours, the current notes or messages of its conversation just before and
    just after it by seq, as two columns for a memory ``m``."""
    flow = f"{d.same_conversation('o', 'm')} AND o.kind IN ('note', 'message') AND o.superseded_by IS NULL"
    return (
        f"(SELECT max(o.seq) FROM memories o WHERE {flow} AND o.seq < m.seq),"
        f" (SELECT min(o.seq) FROM memories o WHERE {flow} AND o.seq > m.seq)"
    )


# What a search naming a time reads of each candidate (``Storage.moments_by_seq``): when it happened
# and the times its words name (``memories.spoken_of``, written with the row); the text only where
# those were not read yet (a memory stored before they were kept, until the background reads it).
MOMENT_COLUMNS = "m.seq, m.occurred_at, m.spoken_of, CASE WHEN m.spoken_of IS NULL THEN m.content END"


def moment_from_row(row: Sequence[Any]) -> tuple[int, tuple[str, str]]:
    """A memory's seq, and when it happened with the times its words name, from MOMENT_COLUMNS."""
    seq, occurred_at, spoken, content = row
    return int(seq), (occurred_at, spoken if spoken is not None else times_named(content, occurred_at))


def dump_json(value: dict[str, Any]) -> str:
    """Compact JSON, non-ASCII kept as it is."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def like_escape(text: str) -> str:
    """``text`` matched literally inside a LIKE pattern, backslash being the escape character
    (PostgreSQL's default; SQLite's with ``ESCAPE '\\'``)."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
