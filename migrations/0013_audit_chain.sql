-- The audit and admin logs as hash chains (issue 21; docs/decisions/0035-verifiable-audit-log.md).
-- Every row carries `hash`, SHA-256 over the previous row's hash and its own content, and `prev`,
-- the previous row's hash as it was when the row was written (32 zero bytes for the first). The
-- store computes both as it appends (tw-store's `chain` module has the exact encoding); signed
-- checkpoints of the heads go to audit_checkpoints and to a file outside the database, and
-- `toolwarden audit verify` recomputes everything.
--
-- Rows written before this migration have neither: the store seals them once, on open, in id
-- order, before it writes anything else. That is the only change a row may ever take, hence the
-- triggers below: `prev` and `hash` may be set while `hash` is empty, no other column ever.

-- The tail is made again with its links required (a NOT NULL column costs an append less than a
-- trigger). Rows a killed process left in it move into audit_log first, as the store's move
-- would have moved them; they are sealed with the rest.
INSERT INTO audit_log (id, execution_id, trace_id, tool, agent_id, skill, user_id, arguments, decision, explanation,
    status, error_code, error_message, output, output_sha256, output_bytes, truncated, started_at,
    completed_at, duration_us, metadata, violation_type, violation_severity)
SELECT id, execution_id, trace_id, tool, agent_id, skill, user_id, arguments, decision, explanation,
    status, error_code, error_message, output, output_sha256, output_bytes, truncated, started_at,
    completed_at, duration_us, metadata, violation_type, violation_severity
FROM audit_tail ORDER BY id;
DROP TABLE audit_tail;
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
    ),
    prev               BLOB    NOT NULL CHECK (length(prev) = 32),
    hash               BLOB    NOT NULL CHECK (length(hash) = 32)
) STRICT;

CREATE TRIGGER audit_tail_no_update BEFORE UPDATE ON audit_tail
BEGIN
    SELECT RAISE(ABORT, 'the audit log is append-only');
END;

ALTER TABLE audit_log ADD COLUMN prev BLOB CHECK (prev IS NULL OR length(prev) = 32);
ALTER TABLE audit_log ADD COLUMN hash BLOB CHECK (hash IS NULL OR length(hash) = 32);
ALTER TABLE admin_log ADD COLUMN prev BLOB CHECK (prev IS NULL OR length(prev) = 32);
ALTER TABLE admin_log ADD COLUMN hash BLOB CHECK (hash IS NULL OR length(hash) = 32);

DROP TRIGGER audit_log_no_update;
CREATE TRIGGER audit_log_no_update BEFORE UPDATE OF
    id, execution_id, trace_id, tool, agent_id, skill, user_id, arguments, decision, explanation,
    status, error_code, error_message, output, output_sha256, output_bytes, truncated, started_at,
    completed_at, duration_us, metadata, violation_type, violation_severity
ON audit_log
BEGIN
    SELECT RAISE(ABORT, 'the audit log is append-only');
END;
CREATE TRIGGER audit_log_sealed BEFORE UPDATE OF prev, hash ON audit_log
WHEN OLD.hash IS NOT NULL OR NEW.hash IS NULL OR NEW.prev IS NULL
BEGIN
    SELECT RAISE(ABORT, 'the audit log is append-only');
END;

DROP TRIGGER admin_log_no_update;
CREATE TRIGGER admin_log_no_update BEFORE UPDATE OF id, at, actor, kind, summary, details
ON admin_log
BEGIN
    SELECT RAISE(ABORT, 'the admin log is append-only');
END;
CREATE TRIGGER admin_log_sealed BEFORE UPDATE OF prev, hash ON admin_log
WHEN OLD.hash IS NOT NULL OR NEW.hash IS NULL OR NEW.prev IS NULL
BEGIN
    SELECT RAISE(ABORT, 'the admin log is append-only');
END;

-- From now on a row comes in with its link, or not at all (a process of an older build still
-- running on this file is refused here: restart it). Audit records come in through the tail,
-- whose columns require the link; audit_log takes rows only from the tail's move, so it needs
-- no trigger of its own (a row put there around Toolwarden without a link is named by `audit
-- verify`, and never sealed).
CREATE TRIGGER admin_log_chained BEFORE INSERT ON admin_log
WHEN NEW.hash IS NULL OR NEW.prev IS NULL
BEGIN
    SELECT RAISE(ABORT, 'an admin log entry needs its chain hash: a process of an older Toolwarden is writing to this file');
END;

-- Signed statements of the logs' heads: "up to here, the audit log ended with this record and
-- this hash, and held this many records; the admin log likewise". Also appended, one JSON line
-- each, to `<database>.checkpoints`, so that cutting the log and this table together is still
-- seen. `signature` is Ed25519 by `public_key` over the encoding in tw-store's `checkpoint`.
CREATE TABLE audit_checkpoints (
    id               INTEGER PRIMARY KEY,
    created_at       INTEGER NOT NULL,
    audit_head_id    INTEGER NOT NULL,
    audit_head_hash  BLOB    NOT NULL CHECK (length(audit_head_hash) = 32),
    audit_count      INTEGER NOT NULL,
    admin_head_id    INTEGER NOT NULL,
    admin_head_hash  BLOB    NOT NULL CHECK (length(admin_head_hash) = 32),
    admin_count      INTEGER NOT NULL,
    public_key       BLOB    NOT NULL CHECK (length(public_key) = 32),
    signature        BLOB    NOT NULL CHECK (length(signature) = 64),
    UNIQUE (audit_head_id, admin_head_id)
) STRICT;

CREATE TRIGGER audit_checkpoints_no_update BEFORE UPDATE ON audit_checkpoints
BEGIN
    SELECT RAISE(ABORT, 'checkpoints are append-only');
END;
CREATE TRIGGER audit_checkpoints_no_delete BEFORE DELETE ON audit_checkpoints
BEGIN
    SELECT RAISE(ABORT, 'checkpoints are append-only');
END;
