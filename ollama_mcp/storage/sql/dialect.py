"""Where the two SQL backends' dialects part: the one object a shared store part asks.

A part in ``storage/sql/`` writes its SQL once, with ``?`` placeholders and the SQL both
databases read the same way (``RETURNING``, ``ON CONFLICT``, ``count(*) FILTER``, ``CAST(? AS
TEXT)``, recursive CTEs). Where SQLite and PostgreSQL spell a thing differently — JSON fields,
lists as one parameter, a row lock, the conversations' key — it asks the backend's ``Dialect``
(``sqlite/dialect.py``, ``postgres/dialect.py``). A backend's dialect is mostly a table: SQL
templates (``{column}``, ``{key}``) that the methods here fill in; what takes code (parameters
and cells converted, the few statements that differ in more than words) is its own methods.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import Any


class Dialect(ABC):
    """One backend's spelling of what the shared SQL needs."""

    # SQL's two-argument maximum: SQLite's scalar ``max``, PostgreSQL's ``greatest``.
    greatest: str
    # Appended to a SELECT of a conversation's row that a write then depends on: PostgreSQL locks
    # the row; SQLite's write transaction (BEGIN IMMEDIATE) already holds the whole file.
    for_update: str
    for_key_share: str
    # Run first in a transaction that counts the chat-model calls and takes one (``chat_calls``):
    # PostgreSQL takes an advisory lock, so two instances cannot both take the last call; SQLite's
    # write transaction already holds the file ("" runs nothing).
    serialize_chat_calls: str
    # Templates of ``{column}`` and ``{key}``; what each means is said by the method that fills it.
    JSON_TEXT: str
    JSON_TRUE: str
    JSON_WITH: str
    JSON_WITH_TRUE: str
    JSON_PAIR: str
    IN_LIST: str
    NAME_LIKE: str
    # A conversation's (``c``) current notes and turns, as columns.
    NOTES_OF_C: str
    MESSAGES_OF_C: str
    # The newest ``occurred_at`` of conversation ``c``'s memories (NULL: none): when its newest
    # memory happened, which its last activity is made of (an imported chat's is its own time, not
    # the import's): SQLite keeps it on the row (sqlite/migrations/0022, 0025); PostgreSQL reads its index.
    LAST_MEMORY_OF_C: str
    # How a memory names its conversation where SQL finds a conversation's memories: SQLite's
    # indexes hold its integer key (``conversation_key``, sqlite/migrations/0023), PostgreSQL's its id.
    # ``OF_CONVERSATION``: memory ``{alias}`` is of the conversation whose id is one ``{value}``.
    # ``IN_CONVERSATIONS``: memory ``{alias}`` is of one of the conversations whose ids are one
    # parameter ``{value}`` made by ``listed``. ``SAME_CONVERSATION``: memories ``{a}`` and
    # ``{b}`` share one. ``OF_C``: memory ``{alias}`` is of conversation ``c``. ``NOTE_ONCE``: the
    # columns of the unique index of current notes (an INSERT's ON CONFLICT target). An INSERT of
    # memories adds ``KEY_COLUMN`` to its columns and ``KEY_VALUE`` to its values right after
    # ``conversation_id``, which must be its second value.
    OF_CONVERSATION: str
    IN_CONVERSATIONS: str
    SAME_CONVERSATION: str
    OF_C: str
    NOTE_ONCE: str
    KEY_COLUMN: str
    KEY_VALUE: str
    # Whether counting NOTES_OF_C costs a query (then 0 stands in where the count is not asked for).
    notes_cost: bool
    # A memory's context (its content after the memories before it): PostgreSQL stores it in
    # ``memories.context``; SQLite computes it, by the view ``memory_contexts``, and stores only
    # ``context_before``, the place of a new version of a note (sqlite/migrations/0019_context_view.sql).
    # ``CONTEXT_OF`` is the SQL of memory ``{alias}``'s context.
    stores_context: bool
    CONTEXT_OF: str

    def context_of(self, alias: str = "m") -> str:
        """The context of the memory ``alias`` as SQL."""
        return self.CONTEXT_OF.format(alias=alias)

    def json_text(self, column: str, key: str) -> str:
        """The JSON object's ``key`` as SQL (NULL when absent)."""
        return self.JSON_TEXT.format(column=column, key=key)

    def json_true(self, column: str, key: str) -> str:
        """A condition: the JSON object's ``key`` holds ``true``."""
        return self.JSON_TRUE.format(column=column, key=key)

    def json_has(self, column: str, key: str) -> str:
        """A condition: the JSON object has ``key`` (with a value that is not null)."""
        return f"{self.json_text(column, key)} IS NOT NULL"

    def json_with(self, column: str, key: str) -> str:
        """The JSON object with ``key`` set to the text of one ``?`` parameter."""
        return self.JSON_WITH.format(column=column, key=key)

    def json_with_true(self, column: str, key: str) -> str:
        """The JSON object with ``key`` set to ``true``."""
        return self.JSON_WITH_TRUE.format(column=column, key=key)

    def json_pair(self, column: str) -> str:
        """A condition on two ``?`` parameters: the object's key (the first) holds a value whose
        text is the second (``true``/``false`` for booleans)."""
        return self.JSON_PAIR.format(column=column)

    def in_list(self, column: str, value: str = "?") -> str:
        """A condition: ``column`` is one of the values of one parameter (``value``, its placeholder)
        made by ``listed``."""
        return self.IN_LIST.format(column=column, value=value)

    def name_like(self, column: str) -> str:
        """A condition on one ``?`` (a LIKE pattern, backslash escaping): case-insensitive match."""
        return self.NAME_LIKE.format(column=column)

    def of_conversation(self, alias: str = "m", value: str = "?") -> str:
        """A condition: memory ``alias`` ("" for the table's own columns) is of the conversation
        whose id is the parameter ``value``."""
        return self.OF_CONVERSATION.format(alias=f"{alias}." if alias else "", value=value)

    def in_conversations(self, alias: str, value: str = "?") -> str:
        """A condition: memory ``alias`` is of one of the conversations whose ids are the parameter
        ``value`` (made by ``listed``)."""
        return self.IN_CONVERSATIONS.format(alias=alias, value=value)

    def same_conversation(self, a: str, b: str) -> str:
        """A condition: memories ``a`` and ``b`` are of one conversation."""
        return self.SAME_CONVERSATION.format(a=a, b=b)

    def of_c(self, alias: str = "m") -> str:
        """A condition: memory ``alias`` is of conversation ``c``."""
        return self.OF_C.format(alias=alias)

    def memory_count(self, counted: bool) -> str:
        """A conversation's (``c``) current notes, as a column; ``counted=False`` allows ``0`` where
        counting costs a query."""
        return self.NOTES_OF_C if counted or not self.notes_cost else "0"

    def message_count(self) -> str:
        """A conversation's (``c``) turns, as a column."""
        return self.MESSAGES_OF_C

    @abstractmethod
    def tags_all(self, tags: Sequence[str], bind: Callable[[Any], str]) -> str:
        """A condition on ``m``: it carries every one of ``tags`` (values kept by ``bind``)."""

    @abstractmethod
    def sql(self, text: str) -> str:
        """SQL written with ``?`` placeholders in the driver's own."""

    @abstractmethod
    def listed(self, values: Sequence[Any]) -> Any:
        """Values as the one parameter ``in_list`` reads."""

    @abstractmethod
    def json(self, value: Any) -> Any:
        """A dict or list as a parameter of a JSON column."""

    @abstractmethod
    def tags(self, tags: Sequence[str]) -> Any:
        """A memory's tags as its ``tags`` column's parameter."""

    @abstractmethod
    def from_json(self, cell: Any) -> Any:
        """A JSON column's cell as Python."""

    @abstractmethod
    def from_tags(self, cell: Any) -> tuple[str, ...]:
        """A ``tags`` cell as the memory's tags."""

    @abstractmethod
    def vector_bytes(self, cell: Any) -> bytes:
        """A stored vector's cell as little-endian float32 bytes (``EmbeddingRow.vector``)."""

    @abstractmethod
    def limit(self, count: int) -> Any:
        """A LIMIT parameter: a negative ``count`` means no limit."""

    @abstractmethod
    async def execute_many(self, conn: Any, sql: str, rows: Sequence[Sequence[Any]]) -> int:
        """One statement (driver placeholders) for each row; how many rows it changed."""

    @abstractmethod
    async def keep_tags(self, conn: Any, pairs: Sequence[tuple[int, str]]) -> None:
        """After memories' rows are inserted: whatever else their (seq, tag) pairs need (SQLite's tag rows)."""

    @abstractmethod
    async def keep_conversation_tags(self, conn: Any, conversation_id: str) -> None:
        """After a conversation's memories were copied in: whatever else their tags need."""

    @abstractmethod
    async def keep_times(self, conn: Any, named: Sequence[tuple[int, str]]) -> None:
        """Set ``spoken_of`` of each (seq, times) memory that has none yet."""

    @abstractmethod
    async def lock_fact_keys(self, conn: Any, keys: Sequence[str]) -> None:
        """Hold the facts of these keys (subject and predicate) for this transaction, in this order."""
