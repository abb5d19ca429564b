"""An export's strings cut while its bytes stream by (``long_strings.ClippedStrings``): the JSON
stays valid whatever the text holds (escapes, quotes, multi-byte characters, surrogate pairs) and
wherever the reads happen to end; a string within the ceiling passes unchanged."""

from __future__ import annotations

import io
import json
import random
from typing import Any

import pytest

from ollama_mcp.services.imports import long_strings
from ollama_mcp.services.imports.long_strings import ClippedStrings

ALPHABET = ["a", "é", "😀", '"', "\\", "\n", "z", " ", "\u2028", "\x01"]


@pytest.mark.parametrize("seed", range(4))
def test_strings_over_the_ceiling_keep_their_start_and_end_and_the_json_stays_valid(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = random.Random(seed)
    for _ in range(500):
        texts = ["".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, 60))) for _ in range(rng.randint(1, 6))]
        document: list[Any] = [{"t": t, "m": [1, {"r": t[::-1]}]} for t in texts]
        limit = rng.randint(12, 90)
        monkeypatch.setattr(long_strings, "CHUNK_BYTES", rng.randint(1, 64))  # reads that end anywhere
        ascii_only = rng.random() < 0.5
        clipping = ClippedStrings(io.BytesIO(json.dumps(document, ensure_ascii=ascii_only).encode()), limit)
        read = json.loads(io.BufferedReader(clipping).read())
        cut = 0
        for given, got in zip(document, read, strict=True):
            for before, after in ((given["t"], got["t"]), (given["m"][1]["r"], got["m"][1]["r"])):
                literal = len(json.dumps(before, ensure_ascii=ascii_only).encode()) - 2
                if literal <= limit:
                    assert after == before
                    continue
                cut += 1
                assert after.endswith("…") and before.startswith(after[:-1]), (before, after, limit)
                kept = len(json.dumps(after[:-1], ensure_ascii=ascii_only).encode()) - 2
                assert limit - 12 <= kept <= limit  # (short of it by an escape or a character at most)
        assert clipping.clipped == cut


def test_a_string_within_the_ceiling_passes_unchanged_and_one_over_it_is_cut() -> None:
    data = json.dumps({"short": "x" * 100, "long": "y" * 1000, "after": "z"}).encode()
    clipping = ClippedStrings(io.BytesIO(data), 100)
    out = io.BufferedReader(clipping).read()
    assert json.loads(out) == {"short": "x" * 100, "long": "y" * 100 + "…", "after": "z"}
    assert clipping.clipped == 1
