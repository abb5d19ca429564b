-- What happened in a conversation from a time on, in time order (see schema/0012): the memories a
-- search reads for what was said of a short window afterwards.
CREATE INDEX memories_conversation_occurred ON memories (conversation_id, occurred_at);
