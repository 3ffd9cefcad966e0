-- Tokens for the HTTP endpoint (`toolwarden serve`, and the desktop app while it runs) that stand
-- for one configured agent: a call made with one is recorded as that agent, whatever the client
-- calls itself, and the token reaches MCP only, never the admin API (an agent must not approve
-- its own confirmations). The administrator's token is a file in the data directory
-- (`serve-token`), not a row here.
--
-- Only a token's SHA-256 is stored: the token itself is shown once, when it is issued, so a copy
-- of this file does not let anyone call tools. A token is never deleted, only revoked, so the
-- audit trail can still say which agent a past token stood for. Issuing and revoking are written
-- with their admin_log entries (`api_token_issued`, `api_token_revoked`) in one transaction.

CREATE TABLE api_tokens (
    id           INTEGER PRIMARY KEY,
    agent_id     TEXT    NOT NULL CHECK (length(agent_id) BETWEEN 1 AND 128),
    token_sha256 TEXT    NOT NULL UNIQUE CHECK (length(token_sha256) = 64),
    label        TEXT,
    created_at   INTEGER NOT NULL,
    created_by   TEXT    NOT NULL,
    revoked_at   INTEGER,
    revoked_by   TEXT,
    CHECK ((revoked_at IS NULL) = (revoked_by IS NULL))
) STRICT;
