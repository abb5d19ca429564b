"""How ask_agent's instructions change a real small model's answers (#84), in-process: labelled so,
not the product path. The agent's own opening messages (``Agent._opening``: the system prompt, the
question and the search made for it) for 8 answerable and 6 category-5 questions of conv-26 (seed
7), each variant's edit applied to them, sent straight to the model with the options the product
sends; token F1 and abstention as bench/real_model_agent.py scores them. A variant file defines
VARIANTS: name -> an edit of the messages, or a function (messages, tools, question) -> answer
marked ``custom``. The variants in bench/agent_prompt_variants ran at 048390f, whose prompt and
search notice held the sentence "Memory holds nothing on this." (their STRONG and NOTICE_TAIL).

    python bench/local_model.py serve --port 18600 &
    OMP_NUM_THREADS=1 python bench/agent_prompt_probe.py bench/agent_prompt_variants/wording.py
"""
# ruff: noqa
import asyncio, json, random, sys, time, urllib.request, uuid
from pathlib import Path
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench import locomo
from bench.real_model_agent import f1, ABSTAINED, answers
from ollama_mcp.app import open_app
from ollama_mcp.config import Settings
from ollama_mcp.services.agent import Run

HOST = "http://127.0.0.1:18600"
DB = Path.home() / ".cache" / "ollama-mcp-bench" / "probe-store" / "memory.db"  # conv-26, recorded once
env = {"PATH": "/usr/bin:/bin", "HOME": str(DB.parent), "OLLAMA_HOST": HOST, "OLLAMA_MCP_DB": str(DB),
       "OLLAMA_MCP_EMBED_MODEL": "all-minilm", "OLLAMA_MCP_CHAT_MODEL": "qwen2.5-coder:1.5b",
       "OLLAMA_MCP_CHAT_CALLS_PER_HOUR": "0", "OLLAMA_MCP_LOG_LEVEL": "WARNING", "PYTHONPATH": str(ROOT)}

async def record():
    if DB.exists():
        return
    DB.parent.mkdir(parents=True, exist_ok=True)
    locomo.PATH = "chats"
    sample = locomo.load(locomo.DEFAULT_DATA)[0]
    async with locomo.mcp_driver(env, {}) as driver:
        await locomo.store_all(driver, [sample], progress=True)

def chat(messages, tools, fmt=None):
    body = {"model": "qwen2.5-coder:1.5b", "messages": messages, "tools": tools, "stream": False,
            **({"format": fmt} if fmt else {}),
            "options": {"temperature": 0.0, "repeat_penalty": 1.0, "num_predict": 300, "num_ctx": 8192}}
    r = urllib.request.Request(HOST + "/api/chat", json.dumps(body).encode(), {"content-type": "application/json"})
    return json.load(urllib.request.urlopen(r, timeout=600))["message"]

async def main(variants):
    await record()
    sample = locomo.load(locomo.DEFAULT_DATA)[0]
    gold = answers(locomo.DEFAULT_DATA)
    rng = random.Random(7)
    qs = [q for c in (1, 2, 3, 4) for q in rng.sample([q for q in sample.questions if q.category == c], 2)]
    qs += rng.sample([q for q in sample.questions if q.category == 5], 6)
    settings = Settings.from_env(env)
    async with open_app(settings, background=False) as app:
        agent = app.agent
        opened = []
        for q in qs:
            run = Run(str(uuid.uuid4()), None, False)
            opened.append(await agent._opening(q.text, run))
        tools = [agent._schema(t) for t in agent._offered(Run("x", None, False))]
    for name, edit in variants.items():
        score = {"f1": [], "abst_ans": 0, "abst_adv": 0}
        for q, messages in zip(qs, opened):
            msgs = json.loads(json.dumps(messages))
            t = time.monotonic()
            if getattr(edit, "custom", False):
                said = edit(msgs, tools, q.text)
            else:
                reply = chat(edit(msgs), tools)
                said = reply.get("content") or json.dumps(reply.get("tool_calls"))
            cat, ans = gold[(sample.sample_id, q.text)]
            ab = bool(ABSTAINED.search(said))
            if cat == 5: score["abst_adv"] += ab
            else: score["f1"].append(f1(said, ans)); score["abst_ans"] += ab
            print(f"  [{name}] c{cat} {time.monotonic()-t:.0f}s ab={ab} f1={f1(said, ans):.2f} | {ans[:30]} | {said[:110]!r}", flush=True)
        print(f"== {name}: F1 {sum(score['f1'])/len(score['f1']):.3f}, abstained answerable {score['abst_ans']}/8, adversarial {score['abst_adv']}/6", flush=True)

if __name__ == "__main__":
    exec(open(sys.argv[1]).read())
    asyncio.run(main(VARIANTS))
