-- Two indexes of `memories` that only two rare readers needed, dropped (#57 item 1: 1.3 MB of a
-- settled 10k store, bench/README.md "A conversation's last activity kept on its row"):
--   * memories_conversation (conversation_id, created_at) gave each conversation's newest memory
--     time, read by list_conversations (order by activity) and retention (idle conversations).
--     The conversation's row now keeps that time, `last_memory_at`, by the triggers below.
--   * memories_created (created_at) served `forget --older-than` alone, which now reads the table
--     in seq order (it lists what it deletes in that order anyway).
-- The conversation's row is already locked by every write that adds or removes its memories
-- (rows.lock_conversation), so keeping the time there costs a write no new wait.

ALTER TABLE conversations ADD COLUMN last_memory_at TEXT;  -- max(created_at) of its memories; NULL: none
UPDATE conversations
   SET last_memory_at = (SELECT max(m.created_at) FROM memories m WHERE m.conversation_id = conversations.id);

-- A memory stored: the time moves on only when the memory is newer (a fact keeps the time its
-- source was said, which is never newer).
CREATE TRIGGER memories_activity_ai AFTER INSERT ON memories BEGIN
    UPDATE conversations SET last_memory_at = new.created_at
     WHERE id = new.conversation_id AND (last_memory_at IS NULL OR last_memory_at < new.created_at);
END;

-- A memory deleted: only when it was the newest, and no other memory of the conversation has its
-- time (the turns of one batch share theirs), is the time read again from what is left: a walk of
-- the conversation's rows, newest first for the first check. A conversation's own delete removes
-- its row first, so its cascade reads nothing.
CREATE TRIGGER memories_activity_ad AFTER DELETE ON memories
WHEN (SELECT c.last_memory_at FROM conversations c WHERE c.id = old.conversation_id) = old.created_at
 AND (SELECT 1 FROM memories s WHERE s.conversation_id = old.conversation_id AND s.created_at = old.created_at
       ORDER BY s.seq DESC LIMIT 1) IS NULL
BEGIN
    UPDATE conversations
       SET last_memory_at = (SELECT max(m.created_at) FROM memories m WHERE m.conversation_id = old.conversation_id)
     WHERE id = old.conversation_id;
END;

-- No statement rewrites a memory's time; should one, the time is read again.
CREATE TRIGGER memories_activity_au AFTER UPDATE OF created_at ON memories
WHEN old.created_at IS NOT new.created_at
BEGIN
    UPDATE conversations
       SET last_memory_at = (SELECT max(m.created_at) FROM memories m WHERE m.conversation_id = new.conversation_id)
     WHERE id = new.conversation_id;
END;

DROP INDEX memories_conversation;
DROP INDEX memories_created;
