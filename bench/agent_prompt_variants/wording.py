# ruff: noqa
# A variant file of bench/agent_prompt_probe.py (exec'd there: chat and json are its).
STRONG = 'When they do not contain the answer, reply "Memory holds nothing on this." and nothing else.'
NOTICE_TAIL = ' They are the closest memories, not necessarily answers: if none of them answers the question, reply "Memory holds nothing on this."'
def sysreplace(old, new):
    def edit(m):
        m[0]["content"] = m[0]["content"].replace(old, new); return m
    return edit
def both(*edits):
    def edit(m):
        for e in edits: m = e(m)
        return m
    return edit
def notice(new):
    def edit(m):
        m[-1]["content"] = m[-1]["content"].replace(NOTICE_TAIL, new); return m
    return edit
VARIANTS = {
    "old-wording": both(sysreplace("Answer briefly, from the memories only. " + STRONG, "Answer briefly and say when the memories do not contain the answer."), notice("")),
    "soft-prompt+notice": both(sysreplace(STRONG, 'If they say nothing about it, say "Memory holds nothing on this."'), notice(' If none of them is about what the question asks, say "Memory holds nothing on this."')),
    "answer-first": both(sysreplace(STRONG, 'Give the answer the memories support, in a few words. Only when no memory is about what is asked, say "Memory holds nothing on this."'), notice("")),
}
