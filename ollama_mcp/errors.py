"""Every exception ollama-mcp raises on purpose.

``str(exc)`` is always a complete sentence that is safe to show the model, the user and the
log: it names what failed and what to do next, and it never quotes memory content, queries or
summaries (the SDK logs tool errors at INFO, and users' words must stay out of log files).

    OllamaMcpError
    ├── ConfigError
    ├── InvalidInputError
    │   └── ImportBrokeOff             (an import file that breaks off: what came before is in)
    ├── NotFoundError
    │   ├── ConversationNotFoundError
    │   ├── JobNotFoundError
    │   ├── TurnNotFoundError          (no streamed turn of that id)
    │   └── MemoryNotFoundError
    ├── MemorySupersededError          (update_memory on a version that was replaced)
    ├── ConversationClosedError
    ├── TurnClosedError                (a streamed turn committed or aborted already)
    ├── JobBusyError                   (a job asked for with options while one of its kind runs)
    ├── StorageError
    │   ├── DatabaseBusyError
    │   └── SchemaError
    ├── ChatBudgetSpent                (background work used its chat-model calls for this hour)
    ├── OllamaError
    │   ├── OllamaUnavailableError      (not reachable, timed out, malformed reply)
    │   │   └── OllamaUnreachableError  (no connection: nothing reached the model)
    │   ├── OllamaModelError            (model not pulled, or not an embedding model)
    │   │   └── InputTooLongError       (one text exceeds the model's context: split, retry)
    │   └── ChatOutputError             (a chat model's reply is not the JSON asked for)
    └── EmbeddingMismatchError          (a vector whose dimension does not fit the store)

Third-party exceptions are translated once, where they enter (``ollama_client``, ``db``,
``store``); anything else that escapes is a bug and is reported as an internal error.
"""

from __future__ import annotations


class OllamaMcpError(Exception):
    """Base of every deliberate ollama-mcp failure."""


class ConfigError(OllamaMcpError):
    """An environment variable or flag has a value we cannot use."""


class InvalidInputError(OllamaMcpError):
    """A caller-supplied value is wrong; the message names the field and the fix."""

    def __init__(self, field: str, problem: str, fix: str) -> None:
        self.field = field
        super().__init__(f"{field}: {problem}; {fix}.")


class ImportBrokeOff(InvalidInputError):
    """An import file ends in the middle (a truncated download): what came before was imported."""

    def __init__(self, message: str) -> None:
        self.field = "FILE"
        OllamaMcpError.__init__(self, message)


class NotFoundError(OllamaMcpError):
    """Something named by id does not exist; ``field`` names the id's field."""

    field: str | None = None


class ConversationNotFoundError(NotFoundError):
    field = "conversation_id"

    def __init__(self, conversation_id: str) -> None:
        self.conversation_id = conversation_id
        super().__init__(
            f"conversation_id: no conversation {conversation_id} exists; call list_conversations "
            "to see the ids, or init_conversation to start one."
        )


class JobNotFoundError(NotFoundError):
    field = "job_id"

    def __init__(self, job_id: str) -> None:
        super().__init__(f"job_id: no job {job_id} exists here; a request for a summary, compaction or facts "
                         "returns the id of its job.")


class TurnNotFoundError(NotFoundError):
    field = "turn_id"

    def __init__(self, turn_id: str) -> None:
        super().__init__(f"turn_id: no turn {turn_id} is being written here; open one by sending a turn with "
                         'status "open".')


class TurnClosedError(OllamaMcpError):
    """A chunk, commit or abort for a streamed turn that was committed or aborted already."""

    def __init__(self, turn_id: str, state: str) -> None:
        self.state = state
        super().__init__(f"turn_id: turn {turn_id} was {state} already, so nothing more can be added to it or done "
                         "with it; open a new turn for another reply.")


class JobBusyError(OllamaMcpError):
    """A summary, compaction or facts job asked for with options (through, strategy) while one of
    its kind runs for the conversation with others: a running job cannot be changed."""

    def __init__(self, job_id: int, kind: str) -> None:
        self.job_id = job_id
        super().__init__(f"job {job_id} ({kind}) is running for this conversation with other options, and a running "
                         "job cannot be changed; ask again once it is done (follow it with its id).")


def not_open(turn_id: str, state: str | None) -> OllamaMcpError:
    """Why a streamed turn cannot take a chunk, a commit or an abort: it never was, or it ended."""
    return TurnNotFoundError(turn_id) if state is None else TurnClosedError(turn_id, state)


class MemoryNotFoundError(NotFoundError):
    field = "memory_id"

    def __init__(self, memory_id: str) -> None:
        self.memory_id = memory_id
        super().__init__(
            f"memory_id: no memory {memory_id} exists (it may have been deleted already); "
            "use a memory_id returned by store_memory or a search."
        )


class MemorySupersededError(OllamaMcpError):
    def __init__(self, memory_id: str, latest_id: str) -> None:
        self.memory_id = memory_id
        self.latest_id = latest_id
        super().__init__(
            f"memory_id: memory {memory_id} is an older version, replaced by {latest_id}; update {latest_id} instead."
        )


class ConversationClosedError(OllamaMcpError):
    def __init__(self, conversation_id: str) -> None:
        self.conversation_id = conversation_id
        super().__init__(
            f"conversation_id: conversation {conversation_id} has ended and accepts no new "
            "memories; it stays searchable. Call init_conversation to start a new one."
        )


class StorageError(OllamaMcpError):
    """The database could not do what was asked; existing data is unchanged."""


class DatabaseBusyError(StorageError):
    """Another process held the write lock for longer than the busy timeout."""


class SchemaError(StorageError):
    """The database file's schema cannot be used by this version."""


class ChatBudgetSpent(OllamaMcpError):
    """Background work made as many chat-model calls this hour as OLLAMA_MCP_CHAT_CALLS_PER_HOUR
    allows (or the setting is 0): the job waits until ``resume_at``, nothing is dropped."""

    def __init__(self, message: str, resume_at: str) -> None:
        super().__init__(message)
        self.resume_at = resume_at


class OllamaError(OllamaMcpError):
    """Ollama could not compute what was asked."""


class OllamaUnavailableError(OllamaError):
    """Ollama is not reachable, too slow, or answered with something unusable."""


class OllamaUnreachableError(OllamaUnavailableError):
    """Nothing answered at Ollama's address: no request reached a model."""


class OllamaModelError(OllamaError):
    """The configured model is missing or cannot do the job."""


class EmbeddingMismatchError(OllamaMcpError):
    """A vector's dimension differs from the one the stored vectors of its model use."""

    @classmethod
    def model_changed(cls, model: str, returned: int, stored: int) -> EmbeddingMismatchError:
        """A query vector that no longer fits the stored ones: the model changed under its name."""
        return cls(
            f"Embedding model {model!r} now returns {returned}-dimensional vectors, but the "
            f"stored vectors of that model have {stored}; the model changed under the same name. "
            "Semantic search is off until the memories are embedded again (re-pull the original "
            "model, or set OLLAMA_MCP_EMBED_MODEL to a new name so they are re-embedded)."
        )


class InputTooLongError(OllamaModelError):
    """One input exceeded the model's context; the embedder splits it and tries again."""

    def __init__(self, model: str) -> None:
        super().__init__(f"A text was longer than the context of embedding model {model!r}.")


class ChatOutputError(OllamaError):
    """A chat model answered with something other than the structure asked for."""
