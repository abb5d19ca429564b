"""ask_agent: a local chat model answers from memory, using the memory tools itself, guarded.

The loop runs over ``MemoryService`` directly (never over MCP). Memory text can carry injected
instructions, so the model is trusted with nothing the caller did not grant:

- **Scope.** A run for a named conversation sees only that conversation (its recall, searches,
  and the targets of its tools) unless the caller asked for ``scope="all"``; the model has no
  argument that widens it.
- **Confirmation.** The tools in ``OLLAMA_MCP_AGENT_CONFIRM`` (by default every tool that writes)
  run only after a human says yes through ``confirm`` (MCP elicitation), and are refused when
  there is no one to ask; the answer's note says what was not done.
- **Data, not instructions.** Memory text reaches the model only inside <memory> tags marked as
  data, in the prompt and in tool results alike; what an agent run saved is marked as such.

Failed tool calls, unknown tools and bad arguments are fed back to the model as tool messages;
they never end the loop.
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import anyio

from ollama_mcp import audit
from ollama_mcp.config import AGENT_WRITING_TOOLS, DEFAULT_MAX_CONTENT_CHARS
from ollama_mcp.domain import AgentAnswer, AuditRow, Memory, utc_now
from ollama_mcp.errors import InvalidInputError, NotFoundError, OllamaMcpError
from ollama_mcp.inputs import fields
from ollama_mcp.inputs.context import AgentQuestion, ContextRequest
from ollama_mcp.ollama.client import OllamaClient, ToolCall
from ollama_mcp.ollama.tool_text import calls_in_text
from ollama_mcp.services.agent_tools import TOOLS, AgentTool, now_text
from ollama_mcp.services.context import AGENT_ACTOR_PREFIX, AGENT_CALL_PREFIX, as_chat_message
from ollama_mcp.services.context_builder import ContextBuilder
from ollama_mcp.services.conversations import Conversations
from ollama_mcp.services.memories import Memories
from ollama_mcp.services.on_demand import WorkOnDemand
from ollama_mcp.services.recall import Recall
from ollama_mcp.services.settling import NOTHING_HELD, settled
from ollama_mcp.services.transcript import Transcript
from ollama_mcp.storage.protocols import Storage

log = logging.getLogger(__name__)

Risk = Literal["low", "high"]  # in the audit trail: "high" when the tool needed the user's yes
Scope = Literal["conversation", "all"]
# "unavailable": the client declared elicitation but this connection cannot carry the question
# (the stateless 2026-07-28 era has no server-to-client requests inside a tool call).
Decision = Literal["accept", "decline", "cancel", "unavailable"]
# Asks the human whether the tool may run with these arguments; None: the client cannot ask.
Confirm = Callable[[str, str], Awaitable[Decision]]
Progress = Callable[[float, float, str], Awaitable[None]]

CONTEXT_TOKENS = 6000  # what build_context may hand the model: room for tools and the answer in 8k
CHAT_CONTEXT = 8192
RESULT_CHARS = 4000  # a tool result fed back to the model is clipped to this
# What one reply may take: a tool call or a brief answer need far less. The cap ends a small model
# that loops before the deadline does (at 7.7 tokens/s, a 1.5B model on one core, 300 take 39 s).
ANSWER_TOKENS = 300
TRANSCRIPT_RESULT_CHARS = 1000  # and kept in the conversation's transcript clipped to this


@dataclass(frozen=True)
class _Said:
    """A message of the run's tool steps, as the transcript keeps it."""

    role: Literal["assistant", "tool"]
    content: str
    actor: str
    tool_calls: tuple[dict[str, Any], ...] = ()
    tool_call_id: str | None = None


@dataclass
class Run:
    request_id: str
    conversation_id: str | None
    confined: bool  # nothing outside conversation_id: no other conversation is read or touched
    question: str = ""
    audit: list[AuditRow] = field(default_factory=list)
    tools_used: list[str] = field(default_factory=list)
    not_done: dict[str, list[str]] = field(default_factory=dict)  # why refused -> the tools, for the caller
    steps_said: list[_Said] = field(default_factory=list)  # the tool calls and results, for the transcript
    steps: int = 0
    calls_made: set[str] = field(default_factory=set)  # each tool call run, by name and arguments
    found: list[Memory] = field(default_factory=list)  # the memories its searches showed the model


class ToolFailure(Exception):
    """A tool call that did not run; its message is fed back to the model, and ``refusal`` (why,
    when the caller should know: a guard held, not a slip of the model) goes into the answer's note."""

    def __init__(self, decision: str, message: str, refusal: str = "") -> None:
        self.decision = decision
        self.refusal = refusal
        super().__init__(message)


class Agent:
    def __init__(
        self,
        store: Storage,
        conversations: Conversations,
        memories: Memories,
        recall: Recall,
        transcript: Transcript,
        context: ContextBuilder,
        work: WorkOnDemand,
        client: OllamaClient,
        model: str | None,
        *,
        allowed: Sequence[str],
        confirm: Sequence[str] = AGENT_WRITING_TOOLS,
        max_steps: int = 5,
        deadline: float = 45.0,
        context_messages: int = 20,
        instructions: str | None = None,
        max_content_chars: int = DEFAULT_MAX_CONTENT_CHARS,
    ) -> None:
        self._store = store  # the audit trail
        self.conversations = conversations
        self.memories = memories
        self.recall = recall
        self.transcript = transcript
        self.context = context
        self.work = work
        self.max_content_chars = max_content_chars  # what a memory the agent stores may hold
        self.client = client
        self.model = model
        self.tools = [TOOLS[name] for name in allowed if name in TOOLS]
        self.confirmed = frozenset(confirm)  # tools that run only after the user's yes
        self.context_messages = context_messages  # recent messages of the conversation given to the model
        self.instructions = instructions  # the operator's addition to the system prompt
        self.max_steps = max_steps
        self.deadline = deadline

    async def ask(
        self,
        asked: AgentQuestion,
        *,
        confirm: Confirm | None = None,
        progress: Progress | None = None,
    ) -> AgentAnswer:
        """Answer the question. Its ``scope``: "conversation" keeps the run inside its conversation
        (the default when a conversation is given), "all" lets it read every conversation (the
        default otherwise)."""
        question = asked.query
        if self.model is None:
            raise OllamaMcpError(
                "ask_agent needs a chat model, but OLLAMA_MCP_CHAT_MODEL is 'none'; set OLLAMA_MCP_AGENT_MODEL "
                "or OLLAMA_MCP_CHAT_MODEL to a tool-capable model such as qwen2.5:3b."
            )
        target = await self.conversations.resolve(asked.conversation_id)
        confined = asked.confined
        if confined and target is None:
            raise InvalidInputError(
                "scope", "is 'conversation' but there is no current conversation", "pass conversation_id or scope 'all'"
            )
        run = Run(str(uuid.uuid4()), target.id if target else None, confined, question)
        answer, note, messages = "", None, []
        started = time.monotonic()
        with anyio.move_on_after(self.deadline) as scope:
            try:  # the search made for the model counts against the deadline too
                messages = await self._opening(question, run)
                answer, note = await self._loop(messages, run, confirm, progress)
            except OllamaMcpError:
                if run.steps_said:  # the model's tools already ran: their audit rows must not be lost
                    await self._write_audit(run)
                raise
        if scope.cancelled_caught:
            note = f"Stopped after {self.deadline:g} s (OLLAMA_MCP_AGENT_DEADLINE); this is what the agent had so far."
            answer = answer or _last_assistant_text(messages) or "The local agent did not finish in time."
            run.audit.append(self._row(run, run.steps + 1, None, None, None, "deadline", note, started))
        # Only now is anything written: a model that is missing or refuses tools changes nothing.
        with audit.through("agent"):
            await self._record(run, question, answer)
        await self._write_audit(run)
        if run.not_done:
            refused = "; ".join(f"{', '.join(dict.fromkeys(tools))} ({why})" for why, tools in run.not_done.items())
            note = " ".join(filter(None, [note, f"Refused: {refused}."]))
        return AgentAnswer(await self.conversation(run), answer, run.tools_used, run.steps, self.model, note)

    async def _record(self, run: Run, question: str, answer: str) -> None:
        """The run's transcript: the question, each tool call and its result, the answer."""
        conversation = await self.conversation(run)
        await self.transcript.add_message(conversation, "user", question, actor="user")
        for said in run.steps_said:  # the tool calls and their results (clipped), in order
            await self.transcript.add_message(
                conversation, said.role, said.content, actor=said.actor, tool_calls=said.tool_calls,
                tool_call_id=said.tool_call_id,
            )
        await self.transcript.add_message(conversation, "assistant", answer, actor=f"{AGENT_ACTOR_PREFIX}{self.model}")

    # -- the loop ---------------------------------------------------------------------------------

    async def _loop(
        self, messages: list[dict[str, Any]], run: Run, confirm: Confirm | None, progress: Progress | None
    ) -> tuple[str, str | None]:
        schemas = [self._schema(tool) for tool in self._offered(run)]
        total = self.max_steps + 1
        repeated = False  # the model's last calls were all calls already run: it is asked to answer
        while True:
            run.steps += 1
            started = time.monotonic()
            if progress:
                await progress(run.steps - 1, total, f"step {run.steps}: asking {self.model}")
            last_step = run.steps > self.max_steps
            reply = await self.client.chat(
                self.model or "", messages, tools=None if last_step or repeated else schemas, num_ctx=CHAT_CONTEXT,
                num_predict=ANSWER_TOKENS,
            )
            if not reply.tool_calls or last_step or repeated:
                decision = "step_limit" if last_step and self.max_steps else "answered"
                run.audit.append(self._row(run, run.steps, None, None, None, decision, "ok", started))
                note = None
                if decision == "step_limit":
                    note = f"The agent reached its limit of {self.max_steps} tool steps (OLLAMA_MCP_AGENT_MAX_STEPS)."
                draft = reply.content.strip() or _last_assistant_text(messages).strip()
                if calls_in_text(draft) is not None:  # asked to answer, the 0.5B writes its call again
                    draft = ""  # the settling call answers from what was found
                else:
                    messages.append({"role": "assistant", "content": draft})  # what the deadline returns
                answer, why = await settled(
                    self.client, self.model or "", messages, run.question, run.found, num_ctx=CHAT_CONTEXT,
                ) if draft or run.found else ("", None)
                return answer or "The local agent gave no answer.", " ".join(filter(None, [note, why])) or None
            # A small model that only asks again what it already asked has found what it will find
            # (the 0.5B wrote the search made for it again until its cap, 77 of 80 questions, #84):
            # the next request offers no tools, so it answers from what the calls returned.
            repeated = all(_made(call) in run.calls_made for call in reply.tool_calls)
            calls = [{"function": {"name": c.name, "arguments": c.arguments}} for c in reply.tool_calls]
            messages.append({"role": "assistant", "content": reply.content, "tool_calls": calls})
            ids = [f"{AGENT_CALL_PREFIX}{run.request_id[:8]}-{run.steps}-{n}" for n in range(len(calls))]
            run.steps_said.append(_Said(
                "assistant", reply.content.strip() or f"(calls {', '.join(c.name for c in reply.tool_calls)})",
                f"{AGENT_ACTOR_PREFIX}{self.model}", tuple({**c, "id": i} for c, i in zip(calls, ids, strict=True)),
            ))
            for call, call_id in zip(reply.tool_calls, ids, strict=True):
                call_started = time.monotonic()
                tool = TOOLS.get(call.name)
                risk: Risk | None = None if tool is None else "high" if tool.name in self.confirmed else "low"
                try:
                    result = await self._run_tool(call, run, confirm)
                    decision, outcome = ("confirmed" if risk == "high" else "ran"), "ok"
                    run.tools_used.append(call.name)
                except ToolFailure as failure:
                    result, decision, outcome = f"Error: {failure}", failure.decision, str(failure)
                    if failure.refusal:
                        run.not_done.setdefault(failure.refusal, []).append(call.name)
                except OllamaMcpError as exc:  # the tool ran and failed (unknown id, closed conversation...)
                    result, decision, outcome = f"Error: {exc}", "ran", str(exc)
                    run.tools_used.append(call.name)
                run.audit.append(self._row(
                    run, run.steps, call.name, audit.digest(call.arguments), risk, decision, outcome, call_started,
                ))
                messages.append({"role": "tool", "content": result[:RESULT_CHARS], "tool_name": call.name})
                run.steps_said.append(_Said("tool", _clip(result, TRANSCRIPT_RESULT_CHARS), call.name, (), call_id))

    async def _run_tool(self, call: ToolCall, run: Run, confirm: Confirm | None) -> str:
        tool = TOOLS.get(call.name)
        if tool is None:
            raise ToolFailure("unknown_tool", f"there is no tool {call.name!r}; use one of {self._names()}.")
        made = _made(call)
        if made in run.calls_made:  # a small model asks the same again instead of answering
            raise ToolFailure("refused", (
                f"{call.name} was already called with these arguments; its result is above. Answer from it now, "
                f'or say "{NOTHING_HELD}"'
            ))
        if tool not in self.tools:
            raise ToolFailure("not_allowed", f"the tool {call.name!r} is turned off by the user's configuration.")
        args = call.arguments if isinstance(call.arguments, Mapping) else {}
        unknown = set(args) - set(tool.parameters["properties"])
        missing = [name for name in tool.parameters["required"] if name not in args]
        if unknown or missing:
            raise ToolFailure("invalid_arguments", (
                f"{call.name} takes {', '.join(tool.parameters['properties']) or 'no arguments'}"
                + (f"; missing {', '.join(missing)}" if missing else "")
                + (f"; unknown {', '.join(sorted(unknown))}" if unknown else "") + "."
            ))
        await self._check_scope(tool, args, run)
        if tool.name in self.confirmed:
            unable = "they need your confirmation, which this client cannot ask for"
            if confirm is None:
                raise ToolFailure("refused", (
                    f"{call.name} needs the user's confirmation and this client cannot ask for it, so it was "
                    "not run. Tell the user to do it themselves if they want it."
                ), unable)
            question = tool.confirm.format(
                target=args.get("memory_id") or args.get("conversation_id"),
                content=str(args.get("content", ""))[:500], conversation=run.conversation_id or "(a new one)",
            )
            decision = await confirm(call.name, question)
            if decision == "unavailable":
                raise ToolFailure("refused", (
                    f"{call.name} needs the user's confirmation and this connection cannot ask for it, so it "
                    "was not run. Tell the user to do it themselves if they want it."
                ), unable.replace("this client", "this connection"))
            if decision != "accept":
                raise ToolFailure(
                    "declined", f"the user did not confirm {call.name} ({decision}); it was not run.",
                    f"you did not confirm them ({decision})",
                )
        try:
            with audit.through("agent"):
                result = await tool.run(self, args, run)
            run.calls_made.add(made)
            return result
        except InvalidInputError as exc:
            raise ToolFailure("invalid_arguments", str(exc)) from exc

    # -- helpers ------------------------------------------------------------------------------------

    def _offered(self, run: Run) -> list[AgentTool]:
        """The tools the model is told about: the allowed ones, less those a confined run may not use."""
        return [tool for tool in self.tools if not (run.confined and tool.wide)]

    def _schema(self, tool: AgentTool) -> dict[str, Any]:
        schema = tool.schema()
        if tool.name in self.confirmed:
            schema["function"]["description"] += " Needs the user's confirmation."
        return schema

    async def _check_scope(self, tool: AgentTool, args: Mapping[str, Any], run: Run) -> None:
        """A confined run reads and changes its own conversation only, whatever the model asks; no
        run deletes the conversation it answers in. Checked before anyone is asked to confirm."""
        if tool.name == "delete_conversation" and run.conversation_id is not None:
            with contextlib.suppress(InvalidInputError):
                if fields.conversation_id("conversation_id", args.get("conversation_id")) == run.conversation_id:
                    raise ToolFailure("not_allowed", (
                        "the conversation this question is asked in cannot be deleted by the agent; it was not run."
                    ), "an agent never deletes the conversation it answers in")
        if not run.confined:
            return
        outside = f"this run is limited to the conversation {run.conversation_id}"
        if tool.wide:
            raise ToolFailure("not_allowed", (
                f"{tool.name} is not available: this run is limited to the conversation {run.conversation_id}. "
                "Use search_memories."
            ), outside)
        try:
            if "conversation_id" in args:
                touched = fields.conversation_id("conversation_id", args["conversation_id"])
            elif "memory_id" in args:
                touched = (
                    await self._store.get_memory(fields.memory_id("memory_id", args["memory_id"]))
                ).conversation_id
            else:
                return
        except (InvalidInputError, NotFoundError):
            return  # the tool itself reports the bad or unknown id
        if touched is not None and touched != run.conversation_id:
            raise ToolFailure("not_allowed", (
                f"{tool.name} was not run: this run is limited to the conversation {run.conversation_id}."
            ), outside)

    async def _opening(self, question: str, run: Run) -> list[dict[str, Any]]:
        """System prompt (role, tools, time), the conversation so far, the question, and the agent's
        first search for it with its results, as if the model had called the search tool itself.

        Small local models do not search on their own: Qwen2.5-Coder 1.5B called no tool for any of
        20 answerable questions, with the memories recalled into the system prompt, which it then
        mostly did not use (bench/README.md, #84). Made for it as a tool call, the search is one
        the model has read the results of, in the place its own would be; it may search again."""
        history: list[dict[str, Any]] = []
        if run.conversation_id is not None:
            built = await self.context.build(ContextRequest(
                run.conversation_id, CONTEXT_TOKENS, self.context_messages, recall_k=0,
            ))
            history = ([{"role": "system", "content": built.summary}] if built.summary else []) + [
                _for_ollama(m) for m in built.recent  # (build_context left orphan tool turns out)
            ]
        lines = [
            "You are a local memory agent. You answer the user's question from their stored memories, "
            "using the tools below when the memories found are not enough. Answer briefly and say when "
            "the memories do not contain the answer. Never invent memories.",
            f"Current date and time: {now_text()}.",
            "Tools: " + "; ".join(f"{t.name} ({t.description})" for t in self._offered(run)) + ".",
        ]
        if self.instructions:
            lines.append(f"Instructions from the person who runs this server: {self.instructions}")
        messages = [{"role": "system", "content": "\n\n".join(lines)}, *history, {"role": "user", "content": question}]
        search = "search_memories" if run.confined else "search_all_conversations"
        if TOOLS[search] in self._offered(run):
            await self._first_search(search, question, messages, run)
        return messages

    async def _first_search(self, search: str, question: str, messages: list[dict[str, Any]], run: Run) -> None:
        """The question searched for the model: a tool call and its result, audited as step 0. Not
        kept in the transcript: every run makes its own, and a copy of five memories in each would
        be found by the next search beside the memories themselves."""
        started = time.monotonic()
        call = ToolCall(search, {"query": question})
        digest = audit.digest(call.arguments)
        try:
            result = await self._run_tool(call, run, None)
        except ToolFailure as failure:  # (a question too long to search: the model goes on without)
            run.audit.append(self._row(run, 0, search, digest, "low", failure.decision, str(failure), started))
            return
        run.tools_used.append(search)
        run.audit.append(self._row(run, 0, search, digest, "low", "ran", "ok", started))
        messages.append({"role": "assistant", "content": "", "tool_calls": [
            {"function": {"name": search, "arguments": call.arguments}}]})
        messages.append({"role": "tool", "content": result[:RESULT_CHARS], "tool_name": search})

    async def _write_audit(self, run: Run) -> None:
        conversation = await self.conversation(run)
        await self._store.insert_audit([
            AuditRow(**{**row.__dict__, "conversation_id": conversation}) for row in run.audit
        ])

    async def conversation(self, run: Run) -> str:
        """The run's conversation, started (anonymous, and current) if it has none yet."""
        if run.conversation_id is None:
            run.conversation_id = (await self.conversations.for_writing(None)).id
        return run.conversation_id

    def _names(self) -> str:
        return ", ".join(t.name for t in self.tools)

    def _row(
        self, run: Run, step: int, tool: str | None, digest: str | None, risk: str | None, decision: str,
        outcome: str, started: float,
    ) -> AuditRow:
        return AuditRow(
            run.request_id, run.conversation_id or "", step, tool, digest, risk, decision, outcome[:500],
            round((time.monotonic() - started) * 1000, 2), utc_now(),
        )


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _made(call: ToolCall) -> str:
    """A call by its tool and arguments: the same twice is one call (``Run.calls_made``)."""
    return f"{call.name} {json.dumps(call.arguments, sort_keys=True, default=str)}"


def _last_assistant_text(messages: Sequence[Mapping[str, Any]]) -> str:
    for message in reversed(messages):
        if message.get("role") == "assistant" and message.get("content"):
            return str(message["content"])
    return ""


def _for_ollama(message: Memory) -> dict[str, Any]:
    """A transcript turn replayed to the chat model in Ollama's shape: a tool call's arguments an
    object (an OpenAI-style client sends them as a JSON string), a tool turn named by its tool."""
    said = as_chat_message(message)
    if message.tool_calls:
        said["tool_calls"] = []
        for call in message.tool_calls:
            function = call.get("function") or {}
            said["tool_calls"].append({"function": {
                "name": function.get("name") or call.get("name"),
                "arguments": _arguments(function.get("arguments", call.get("arguments"))),
            }})
        said["content"] = message.content
    if message.role == "tool":
        said.pop("tool_call_id", None)
        if message.actor:
            said["tool_name"] = message.actor
    return said


def _arguments(value: object) -> dict[str, Any]:
    if isinstance(value, dict):
        return value
    if isinstance(value, str):
        try:
            parsed = json.loads(value)
        except ValueError:
            return {}
        return parsed if isinstance(parsed, dict) else {}
    return {}
