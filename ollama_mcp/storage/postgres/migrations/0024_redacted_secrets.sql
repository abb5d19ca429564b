-- What a write's redaction replaced: see sqlite/migrations/0028_redacted_secrets.sql.
ALTER TABLE write_audit ADD COLUMN redacted text;
