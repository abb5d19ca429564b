"""The store parts written once, composed once: each backend's store is ``SqlStore`` plus the
parts that are its own (``sqlite/store.py``, ``postgres/store.py``)."""

from ollama_mcp.storage.sql.chat_calls import ChatCallStore
from ollama_mcp.storage.sql.claims import ClaimStore
from ollama_mcp.storage.sql.clients import ClientStore
from ollama_mcp.storage.sql.conversations import ConversationStore
from ollama_mcp.storage.sql.facts import FactStore
from ollama_mcp.storage.sql.open_turns import OpenTurnStore
from ollama_mcp.storage.sql.revisions import RevisionStore
from ollama_mcp.storage.sql.secrets import SecretStore
from ollama_mcp.storage.sql.shares import ShareStore
from ollama_mcp.storage.sql.tokens import TokenStore
from ollama_mcp.storage.sql.transcript import TranscriptStore


class SqlStore(
    ClientStore, ConversationStore, FactStore, TranscriptStore, OpenTurnStore, RevisionStore, TokenStore, ShareStore,
    ChatCallStore, ClaimStore, SecretStore,
):
    """Clients, conversations, facts, transcripts and turns being streamed, access tokens, shares
    and the chat-model calls of background work, on either backend."""
