-- A conversation's last activity is when its newest memory happened (`occurred_at`), not when it
-- was stored (#79 item 5): an imported 2024 chat was stored today, and sorted above today's chats,
-- escaped `forget --older-than` and retention. The column keeps its name (`last_memory_at`: the
-- newest memory's time); what it holds is now max(occurred_at). A memory stored with no time of
-- its own happened when it was stored (occurred_at = created_at), so a live conversation's
-- activity is what it was. memories_conversation_occurred (conversation_key, occurred_at) finds
-- the newest time again when the newest memory goes.

DROP TRIGGER memories_activity_ai;
DROP TRIGGER memories_activity_ad;
DROP TRIGGER memories_activity_au;

UPDATE conversations
   SET last_memory_at = (SELECT max(m.occurred_at) FROM memories m WHERE m.conversation_key = conversations.key);

CREATE TRIGGER memories_activity_ai AFTER INSERT ON memories BEGIN
    UPDATE conversations SET last_memory_at = new.occurred_at
     WHERE key = new.conversation_key AND (last_memory_at IS NULL OR last_memory_at < new.occurred_at);
END;

CREATE TRIGGER memories_activity_ad AFTER DELETE ON memories
WHEN (SELECT c.last_memory_at FROM conversations c WHERE c.key = old.conversation_key) = old.occurred_at
 AND (SELECT 1 FROM memories s WHERE s.conversation_key = old.conversation_key AND s.occurred_at = old.occurred_at
       LIMIT 1) IS NULL
BEGIN
    UPDATE conversations
       SET last_memory_at = (SELECT max(m.occurred_at) FROM memories m WHERE m.conversation_key = old.conversation_key)
     WHERE key = old.conversation_key;
END;

CREATE TRIGGER memories_activity_au AFTER UPDATE OF occurred_at ON memories
WHEN old.occurred_at IS NOT new.occurred_at
BEGIN
    UPDATE conversations
       SET last_memory_at = (SELECT max(m.occurred_at) FROM memories m WHERE m.conversation_key = new.conversation_key)
     WHERE key = new.conversation_key;
END;
