-- Toolwarden's first schema: the append-only audit log and the persisted custom tools.
-- Times are microseconds since the Unix epoch; JSON columns hold compact JSON text.

CREATE TABLE audit_log (
    id            INTEGER PRIMARY KEY,
    execution_id  TEXT    NOT NULL UNIQUE,
    trace_id      TEXT    NOT NULL,
    tool          TEXT    NOT NULL,
    agent_id      TEXT    NOT NULL,
    skill         TEXT,
    user_id       TEXT,
    arguments     TEXT    NOT NULL,
    decision      TEXT,
    explanation   TEXT,
    status        TEXT    NOT NULL,
    error_code    TEXT,
    error_message TEXT,
    output        TEXT,
    output_sha256 TEXT,
    output_bytes  INTEGER NOT NULL,
    truncated     INTEGER NOT NULL,
    started_at    INTEGER NOT NULL,
    completed_at  INTEGER NOT NULL,
    duration_us   INTEGER NOT NULL,
    metadata      TEXT    NOT NULL
) STRICT;

CREATE INDEX audit_log_tool    ON audit_log (tool, id);
CREATE INDEX audit_log_status  ON audit_log (status, id);
CREATE INDEX audit_log_agent   ON audit_log (agent_id, id);
CREATE INDEX audit_log_started ON audit_log (started_at);

-- The log is evidence: rows are never changed or removed through SQL.
CREATE TRIGGER audit_log_no_update BEFORE UPDATE ON audit_log
BEGIN
    SELECT RAISE(ABORT, 'the audit log is append-only');
END;

CREATE TRIGGER audit_log_no_delete BEFORE DELETE ON audit_log
BEGIN
    SELECT RAISE(ABORT, 'the audit log is append-only');
END;

CREATE TABLE custom_tools (
    name       TEXT    PRIMARY KEY,
    spec       TEXT    NOT NULL,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
) STRICT;
