# ruff: noqa
# A variant file of bench/agent_prompt_probe.py (exec'd there: chat and json are its).
STRONG = 'When they do not contain the answer, reply "Memory holds nothing on this." and nothing else.'
NOTICE_TAIL = ' They are the closest memories, not necessarily answers: if none of them answers the question, reply "Memory holds nothing on this."'
OLD = "Answer briefly and say when the memories do not contain the answer."
def old(m):
    m[0]["content"] = m[0]["content"].replace("Answer briefly, from the memories only. " + STRONG, OLD)
    m[-1]["content"] = m[-1]["content"].replace(NOTICE_TAIL, "")
    return m
def draftjson(m, tools, question):
    m = old(m)
    draft = chat(m, tools)
    if draft.get("tool_calls"):
        return json.dumps(draft["tool_calls"])
    m.append({"role": "assistant", "content": draft.get("content") or ""})
    schema = {"type": "object", "properties": {"in_memory": {"type": "boolean"}, "answer": {"type": "string"}}, "required": ["in_memory", "answer"]}
    m.append({"role": "user", "content": "Reply JSON: in_memory (true when the memories found state the answer to my question, false when they do not), answer (the answer alone, in a few words)."})
    r = json.loads(chat(m, None, schema).get("content") or "{}")
    print("     json:", r, "| draft:", (draft.get("content") or "")[:60].replace(chr(10), " "))
    return r.get("answer", "") if r.get("in_memory") else "Memory holds nothing on this."
draftjson.custom = True
VARIANTS = {"draft+json": draftjson}
