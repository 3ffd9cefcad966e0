-- The policy engine's durable state: settings shared by every process on one data directory, the
-- append-only log of administrative changes, calls waiting for a person's approval, standing
-- approvals (grants), rate-limit events, and violations on audit records.
-- Times are microseconds since the Unix epoch; JSON columns hold compact JSON text; short kinds are
-- snake_case (a lowercase letter, then lowercase letters, digits and underscores, at most 64).

-- The operational mode, the license tier and the like, so the CLI and the desktop app agree.
CREATE TABLE settings (
    key        TEXT    PRIMARY KEY,
    value      TEXT    NOT NULL,
    updated_at INTEGER NOT NULL,
    updated_by TEXT    NOT NULL
) STRICT;

-- Who changed the rules, when, and how: mode switches, policy reloads, grants, tool switches.
CREATE TABLE admin_log (
    id      INTEGER PRIMARY KEY,
    at      INTEGER NOT NULL,
    actor   TEXT    NOT NULL,
    kind    TEXT    NOT NULL CHECK (
        length(kind) <= 64 AND kind GLOB '[a-z]*' AND kind NOT GLOB '*[^a-z0-9_]*'
    ),
    summary TEXT    NOT NULL,
    details TEXT    NOT NULL
) STRICT;

CREATE INDEX admin_log_kind ON admin_log (kind, id);
CREATE INDEX admin_log_at   ON admin_log (at);

-- Like the audit log, the record of administrative changes is evidence.
CREATE TRIGGER admin_log_no_update BEFORE UPDATE ON admin_log
BEGIN
    SELECT RAISE(ABORT, 'the admin log is append-only');
END;

CREATE TRIGGER admin_log_no_delete BEFORE DELETE ON admin_log
BEGIN
    SELECT RAISE(ABORT, 'the admin log is append-only');
END;

-- Standing approvals. `arguments` holds the exact arguments ('exact'), the argument pattern
-- ('pattern'), or nothing ('tool': any call of the tool). NULL agent_id or skill: any.
CREATE TABLE grants (
    id              TEXT    PRIMARY KEY,
    tool            TEXT    NOT NULL,
    scope           TEXT    NOT NULL CHECK (scope IN ('exact', 'pattern', 'tool')),
    arguments       TEXT,
    agent_id        TEXT,
    skill           TEXT,
    created_at      INTEGER NOT NULL,
    created_by      TEXT    NOT NULL,
    expires_at      INTEGER,
    revoked_at      INTEGER,
    revoked_by      TEXT,
    confirmation_id TEXT    REFERENCES confirmations (id),
    CHECK ((scope = 'tool') = (arguments IS NULL)),
    CHECK ((revoked_at IS NULL) = (revoked_by IS NULL))
) STRICT;

CREATE INDEX grants_tool ON grants (tool, created_at);

-- Calls held for a person's approval. Once out of 'pending' a row records who settled it and
-- when (an expired row: its deadline, and nobody).
CREATE TABLE confirmations (
    id           TEXT    PRIMARY KEY,
    execution_id TEXT    NOT NULL,
    tool         TEXT    NOT NULL,
    arguments    TEXT    NOT NULL,
    agent_id     TEXT    NOT NULL,
    skill        TEXT,
    user_id      TEXT,
    reason       TEXT    NOT NULL,
    explanation  TEXT    NOT NULL,
    created_at   INTEGER NOT NULL,
    expires_at   INTEGER NOT NULL,
    state        TEXT    NOT NULL DEFAULT 'pending'
                         CHECK (state IN ('pending', 'approved', 'denied', 'expired')),
    resolved_at  INTEGER,
    resolved_by  TEXT,
    note         TEXT,
    grant_id     TEXT    REFERENCES grants (id),
    CHECK ((state = 'pending') = (resolved_at IS NULL)),
    CHECK ((state IN ('approved', 'denied')) = (resolved_by IS NOT NULL)),
    CHECK (state = 'approved' OR grant_id IS NULL)
) STRICT;

CREATE INDEX confirmations_state ON confirmations (state, created_at);

-- One row per admitted call per rate-limit key; counted over sliding windows and pruned as
-- they age out.
CREATE TABLE rate_events (
    key TEXT    NOT NULL,
    at  INTEGER NOT NULL
) STRICT;

CREATE INDEX rate_events_key_at ON rate_events (key, at);

-- Every denied call is also a violation: what kind, and how serious. Both or neither.
ALTER TABLE audit_log ADD COLUMN violation_type TEXT CHECK (
    length(violation_type) <= 64
    AND violation_type GLOB '[a-z]*'
    AND violation_type NOT GLOB '*[^a-z0-9_]*'
);

ALTER TABLE audit_log ADD COLUMN violation_severity TEXT CHECK (
    violation_severity IN ('warning', 'error', 'critical')
    AND (violation_type IS NULL) = (violation_severity IS NULL)
);

-- Violations are few; this index lets "violations only" page through them without a scan.
CREATE INDEX audit_log_violations ON audit_log (id) WHERE violation_type IS NOT NULL;
