-- The fresh end of the audit log. A tool call's record is committed here, before its caller gets
-- the answer, and moved into audit_log in batches off the call's path (tw-store's writer): a row
-- committed into audit_log updates its twelve filter indexes, about a dozen 4 KiB WAL frames a
-- commit, while a row here writes two. Readers see both: the store moves the tail before it
-- answers a query, and `get` looks in both. See docs/decisions/0033-audit-append.md.
--
-- Ids continue audit_log's (the writer gives each row the next id over both tables), so a move
-- keeps them. The columns and checks are audit_log's, so a row that goes in here goes into
-- audit_log too: a migration that changes audit_log's columns changes these as well.
CREATE TABLE audit_tail (
    id                 INTEGER PRIMARY KEY,
    execution_id       TEXT    NOT NULL UNIQUE,
    trace_id           TEXT    NOT NULL,
    tool               TEXT    NOT NULL,
    agent_id           TEXT    NOT NULL,
    skill              TEXT,
    user_id            TEXT,
    arguments          TEXT    NOT NULL,
    decision           TEXT,
    explanation        TEXT,
    status             TEXT    NOT NULL,
    error_code         TEXT,
    error_message      TEXT,
    output             TEXT,
    output_sha256      TEXT,
    output_bytes       INTEGER NOT NULL,
    truncated          INTEGER NOT NULL,
    started_at         INTEGER NOT NULL,
    completed_at       INTEGER NOT NULL,
    duration_us        INTEGER NOT NULL,
    metadata           TEXT    NOT NULL,
    violation_type     TEXT    CHECK (
        length(violation_type) <= 64
        AND violation_type GLOB '[a-z]*'
        AND violation_type NOT GLOB '*[^a-z0-9_]*'
    ),
    violation_severity TEXT    CHECK (
        violation_severity IN ('warning', 'error', 'critical')
        AND (violation_type IS NULL) = (violation_severity IS NULL)
    )
) STRICT;

-- A record is evidence from the moment it is written. Only the move deletes tail rows, in the
-- same transaction that copies them into audit_log.
CREATE TRIGGER audit_tail_no_update BEFORE UPDATE ON audit_tail
BEGIN
    SELECT RAISE(ABORT, 'the audit log is append-only');
END;
