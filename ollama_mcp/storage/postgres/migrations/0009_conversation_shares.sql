-- Conversations their owners share with other principals of the HTTP server (share_conversation),
-- kept in the local principal's schema beside the tokens: the server reads it to decide whose
-- store serves a call that names a conversation the caller does not own. The conversation itself
-- stays in its owner's schema; a share of one deleted since is dropped when the grantee lists.
CREATE TABLE conversation_shares (
    conversation_id  text NOT NULL,
    grantee          text NOT NULL,
    owner            text NOT NULL,
    access           text NOT NULL CHECK (access IN ('read', 'write')),
    granted_at       text NOT NULL,
    PRIMARY KEY (conversation_id, grantee)
);
CREATE INDEX conversation_shares_grantee ON conversation_shares (grantee);
