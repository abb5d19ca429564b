"""Other tools' exports, built as those tools write them."""

from __future__ import annotations

from typing import Any


def chatgpt_conversation(cid: str = "c-1", title: str = "Lisbon trip", extra: int = 0) -> dict[str, Any]:
    """A ChatGPT tree: system root, a question, a first answer, a regenerated answer (the current
    branch), then ``extra`` more exchanges on the current branch."""
    def node(nid: str, parent: str | None, role: str | None, text: str | None, t: float, children: list[str],
             **content: Any) -> dict[str, Any]:
        message = None if role is None else {
            "id": nid, "author": {"role": role}, "create_time": t,
            "content": content or {"content_type": "text", "parts": [text]}, "metadata": {},
        }
        return {"id": nid, "message": message, "parent": parent, "children": children}

    mapping = {
        "root": node("root", None, None, None, 0, ["sys"]),
        "sys": node("sys", "root", "system", "", T0, ["q1"]),
        "q1": node("q1", "sys", "user", "Which day do the flights to Lisbon leave?", T0 + 10, ["a1", "a2"]),
        "a1": node("a1", "q1", "assistant", "The first answer, regenerated away", T0 + 20, []),
        "a2": node("a2", "q1", "assistant", None, T0 + 30, ["q2"], content_type="multimodal_text",
                   parts=["They leave on May 4.", {"content_type": "image_asset_pointer", "asset": "x"}]),
        "q2": node("q2", "a2", "user", "And the hotel?", T0 + 40, ["a3"]),
        "a3": node("a3", "q2", "assistant", "The Alfama hotel, three nights.", T0 + 50, []),
    }
    last = "a3"
    for i in range(extra):
        q, a = f"xq{i}", f"xa{i}"
        mapping[last]["children"] = [q]
        mapping[q] = node(q, last, "user", f"Follow-up question {i}", T0 + 100 + i, [a])
        mapping[a] = node(a, q, "assistant", f"Follow-up answer {i}", T0 + 101 + i, [])
        last = a
    return {"title": title, "create_time": T0, "update_time": T0 + 200, "mapping": mapping, "current_node": last,
            "conversation_id": cid, "id": cid}


T0 = 1_700_000_000  # 2023-11-14T22:13:20Z
