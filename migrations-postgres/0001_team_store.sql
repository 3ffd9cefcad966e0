-- The team store: everything tw-store keeps, in PostgreSQL, for several `toolwarden serve`
-- replicas on several hosts. It is the SQLite schema as of migrations/0015, in PostgreSQL's
-- dialect; from here on every schema change adds a migration to both directories.
--
-- Differences from SQLite, and why:
-- - The audit log has no tail table: PostgreSQL takes concurrent inserts, so records go straight
--   into audit_log.
-- - Each writer (a replica's store) appends to its own hash chain (`chain`, `seq`), so replicas
--   never wait on one head; signed checkpoints join the chains (docs/decisions/0036).
-- - Changes other replicas follow and settled confirmations are pushed with NOTIFY.
-- Times are µs since the epoch (BIGINT), JSON is stored as text, exactly as in SQLite, so both
-- backends hash, export and decode the same values.

CREATE TABLE audit_log (
    id                 BIGINT  GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    chain              TEXT    NOT NULL,
    seq                BIGINT  NOT NULL CHECK (seq >= 1),
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
    output_bytes       BIGINT  NOT NULL,
    truncated          BIGINT  NOT NULL,
    started_at         BIGINT  NOT NULL,
    completed_at       BIGINT  NOT NULL,
    duration_us        BIGINT  NOT NULL,
    metadata           TEXT    NOT NULL,
    violation_type     TEXT    CHECK (
        length(violation_type) <= 64 AND violation_type ~ '^[a-z][a-z0-9_]*$'
    ),
    violation_severity TEXT    CHECK (violation_severity IN ('warning', 'error', 'critical')),
    chain_run_id       TEXT    GENERATED ALWAYS AS (metadata::jsonb #>> '{chain,run_id}') STORED,
    chain_step         TEXT    GENERATED ALWAYS AS (metadata::jsonb #>> '{chain,step}') STORED,
    prev               BYTEA   NOT NULL CHECK (length(prev) = 32),
    hash               BYTEA   NOT NULL CHECK (length(hash) = 32),
    UNIQUE (chain, seq),
    CHECK ((violation_type IS NULL) = (violation_severity IS NULL))
);
CREATE INDEX audit_log_tool        ON audit_log (tool, id);
CREATE INDEX audit_log_status      ON audit_log (status, id);
CREATE INDEX audit_log_agent       ON audit_log (agent_id, id);
CREATE INDEX audit_log_skill       ON audit_log (skill, id);
CREATE INDEX audit_log_tool_status ON audit_log (tool, status, id);
CREATE INDEX audit_log_started     ON audit_log (started_at);
CREATE INDEX audit_log_violations  ON audit_log (id) WHERE violation_type IS NOT NULL;
CREATE INDEX audit_log_chain_run   ON audit_log (chain_run_id, id) WHERE chain_run_id IS NOT NULL;

-- The writers' chains. A writer holds one through a session advisory lock while it is open and a
-- writer that opens adopts a free one (see tw-store's pg_chain), so there are as many chains as
-- writers were ever open at once.
CREATE TABLE audit_chains (
    chain      TEXT    PRIMARY KEY,
    started_at BIGINT  NOT NULL,
    host       TEXT    NOT NULL
);

-- The keys replicas sign checkpoints with (each in its data directory): a checkpoint signed by a
-- key not recorded here is foreign.
CREATE TABLE audit_keys (
    public_key BYTEA   PRIMARY KEY CHECK (length(public_key) = 32),
    host       TEXT    NOT NULL,
    first_seen BIGINT  NOT NULL
);

CREATE TABLE custom_tools (
    name       TEXT    PRIMARY KEY,
    spec       TEXT    NOT NULL,
    created_at BIGINT  NOT NULL,
    updated_at BIGINT  NOT NULL
);

CREATE TABLE settings (
    key        TEXT    PRIMARY KEY,
    value      TEXT    NOT NULL,
    updated_at BIGINT  NOT NULL,
    updated_by TEXT    NOT NULL
);

CREATE TABLE admin_log (
    id      BIGINT  PRIMARY KEY,
    at      BIGINT  NOT NULL,
    actor   TEXT    NOT NULL,
    kind    TEXT    NOT NULL CHECK (length(kind) <= 64 AND kind ~ '^[a-z][a-z0-9_]*$'),
    summary TEXT    NOT NULL,
    details TEXT    NOT NULL,
    prev    BYTEA   NOT NULL CHECK (length(prev) = 32),
    hash    BYTEA   NOT NULL CHECK (length(hash) = 32)
);
CREATE INDEX admin_log_kind ON admin_log (kind, id);
CREATE INDEX admin_log_at   ON admin_log (at);

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
    context      TEXT,
    created_at   BIGINT  NOT NULL,
    expires_at   BIGINT  NOT NULL,
    state        TEXT    NOT NULL DEFAULT 'pending'
                         CHECK (state IN ('pending', 'approved', 'denied', 'expired')),
    resolved_at  BIGINT,
    resolved_by  TEXT,
    note         TEXT,
    grant_id     TEXT,
    CHECK ((state = 'pending') = (resolved_at IS NULL)),
    CHECK ((state IN ('approved', 'denied')) = (resolved_by IS NOT NULL)),
    CHECK (state = 'approved' OR grant_id IS NULL)
);
CREATE INDEX confirmations_state ON confirmations (state, created_at);

CREATE TABLE grants (
    id              TEXT    PRIMARY KEY,
    tool            TEXT    NOT NULL,
    scope           TEXT    NOT NULL CHECK (scope IN ('exact', 'pattern', 'tool')),
    arguments       TEXT,
    agent_id        TEXT,
    skill           TEXT,
    created_at      BIGINT  NOT NULL,
    created_by      TEXT    NOT NULL,
    expires_at      BIGINT,
    revoked_at      BIGINT,
    revoked_by      TEXT,
    confirmation_id TEXT    REFERENCES confirmations (id),
    CHECK ((scope = 'tool') = (arguments IS NULL)),
    CHECK ((revoked_at IS NULL) = (revoked_by IS NULL))
);
CREATE INDEX grants_tool ON grants (tool, created_at);
ALTER TABLE confirmations ADD FOREIGN KEY (grant_id) REFERENCES grants (id);

CREATE TABLE rate_events (
    key TEXT    NOT NULL,
    at  BIGINT  NOT NULL
);
CREATE INDEX rate_events_key_at ON rate_events (key, at);

CREATE TABLE tool_switches (
    tool        TEXT    NOT NULL CHECK (length(tool) BETWEEN 1 AND 128),
    tier        TEXT    NOT NULL CHECK (tier IN ('core', 'pro', 'teams', 'enterprise')),
    disabled_at BIGINT  NOT NULL,
    disabled_by TEXT    NOT NULL,
    PRIMARY KEY (tool, tier)
);

CREATE TABLE tool_classifications (
    tool            TEXT    PRIMARY KEY CHECK (length(tool) BETWEEN 1 AND 128),
    definition_hash TEXT    NOT NULL,
    source          TEXT    NOT NULL CHECK (source IN ('static', 'llm', 'heuristic', 'admin')),
    capabilities    TEXT    NOT NULL CHECK (jsonb_typeof(capabilities::jsonb) = 'array'),
    detail          TEXT,
    classified_at   BIGINT  NOT NULL,
    classified_by   TEXT    NOT NULL
);

CREATE TABLE skill_overrides (
    skill        TEXT    NOT NULL CHECK (length(skill) BETWEEN 1 AND 64),
    tool         TEXT    NOT NULL CHECK (length(tool) BETWEEN 1 AND 128),
    action       TEXT    NOT NULL CHECK (action IN ('add', 'remove')),
    access_level TEXT    CHECK (access_level IN ('standard', 'elevated', 'admin')),
    reason       TEXT,
    created_at   BIGINT  NOT NULL,
    created_by   TEXT    NOT NULL,
    PRIMARY KEY (skill, tool),
    CHECK (action = 'add' OR access_level IS NULL)
);

CREATE TABLE api_tokens (
    id           BIGINT  GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    agent_id     TEXT    NOT NULL CHECK (length(agent_id) BETWEEN 1 AND 128),
    token_sha256 TEXT    NOT NULL UNIQUE CHECK (length(token_sha256) = 64),
    label        TEXT,
    created_at   BIGINT  NOT NULL,
    created_by   TEXT    NOT NULL,
    revoked_at   BIGINT,
    revoked_by   TEXT,
    CHECK ((revoked_at IS NULL) = (revoked_by IS NULL))
);

CREATE TABLE upstream_pins (
    server             TEXT    NOT NULL CHECK (length(server) BETWEEN 1 AND 64),
    tool               TEXT    NOT NULL CHECK (length(tool) BETWEEN 1 AND 256),
    definition_hash    TEXT    NOT NULL CHECK (length(definition_hash) = 64),
    definition         TEXT    NOT NULL,
    pinned_at          BIGINT  NOT NULL,
    pinned_by          TEXT    NOT NULL,
    pending_hash       TEXT    CHECK (pending_hash IS NULL OR length(pending_hash) = 64),
    pending_definition TEXT,
    pending_since      BIGINT,
    PRIMARY KEY (server, tool),
    CHECK ((pending_hash IS NULL) = (pending_definition IS NULL)),
    CHECK ((pending_hash IS NULL) = (pending_since IS NULL))
);

CREATE TABLE chain_runs (
    id           TEXT    PRIMARY KEY CHECK (length(id) BETWEEN 1 AND 128),
    chain        TEXT    NOT NULL CHECK (length(chain) BETWEEN 1 AND 64),
    trace_id     TEXT    NOT NULL,
    agent_id     TEXT    NOT NULL,
    skill        TEXT,
    user_id      TEXT,
    status       TEXT    NOT NULL CHECK (status IN
                     ('running', 'completed', 'failed', 'cancelled', 'timeout', 'interrupted')),
    input        TEXT    NOT NULL,
    output       TEXT,
    error        TEXT,
    steps        TEXT    NOT NULL CHECK (jsonb_typeof(steps::jsonb) = 'array'),
    started_at   BIGINT  NOT NULL,
    completed_at BIGINT,
    owner        TEXT
);
CREATE INDEX chain_runs_started ON chain_runs (started_at DESC);
CREATE INDEX chain_runs_chain   ON chain_runs (chain, started_at DESC);
CREATE INDEX chain_runs_running ON chain_runs (id) WHERE status = 'running';

CREATE TABLE audit_checkpoints (
    id               BIGINT  GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    created_at       BIGINT  NOT NULL,
    -- Every chain's head at the time: a JSON array of {chain, seq, hash}, sorted by chain;
    -- audit_head_hash is their join (see checkpoint::join_heads), audit_head_id the newest id.
    audit_heads      TEXT    NOT NULL,
    audit_head_id    BIGINT  NOT NULL,
    audit_head_hash  BYTEA   NOT NULL CHECK (length(audit_head_hash) = 32),
    audit_count      BIGINT  NOT NULL,
    admin_head_id    BIGINT  NOT NULL,
    admin_head_hash  BYTEA   NOT NULL CHECK (length(admin_head_hash) = 32),
    admin_count      BIGINT  NOT NULL,
    public_key       BYTEA   NOT NULL CHECK (length(public_key) = 32),
    signature        BYTEA   NOT NULL CHECK (length(signature) = 64)
);

-- What other replicas follow: a counter per table, bumped by triggers (as in SQLite), and a
-- NOTIFY on channel `toolwarden_changes` naming the table, so they re-read within a moment.
CREATE TABLE change_counters (
    name    TEXT    PRIMARY KEY,
    counter BIGINT  NOT NULL DEFAULT 0
);
INSERT INTO change_counters (name) VALUES
    ('settings'), ('tool_switches'), ('skill_overrides'), ('tool_classifications'),
    ('custom_tools'), ('upstream_pins');

CREATE FUNCTION toolwarden_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE change_counters SET counter = counter + 1 WHERE name = TG_TABLE_NAME;
    PERFORM pg_notify('toolwarden_changes', TG_TABLE_NAME);
    RETURN NULL;
END $$;

CREATE TRIGGER settings_changed AFTER INSERT OR UPDATE OR DELETE ON settings
    FOR EACH STATEMENT EXECUTE FUNCTION toolwarden_changed();
CREATE TRIGGER tool_switches_changed AFTER INSERT OR UPDATE OR DELETE ON tool_switches
    FOR EACH STATEMENT EXECUTE FUNCTION toolwarden_changed();
CREATE TRIGGER skill_overrides_changed AFTER INSERT OR UPDATE OR DELETE ON skill_overrides
    FOR EACH STATEMENT EXECUTE FUNCTION toolwarden_changed();
CREATE TRIGGER tool_classifications_changed AFTER INSERT OR UPDATE OR DELETE ON tool_classifications
    FOR EACH STATEMENT EXECUTE FUNCTION toolwarden_changed();
CREATE TRIGGER custom_tools_changed AFTER INSERT OR UPDATE OR DELETE ON custom_tools
    FOR EACH STATEMENT EXECUTE FUNCTION toolwarden_changed();
CREATE TRIGGER upstream_pins_changed AFTER INSERT OR UPDATE OR DELETE ON upstream_pins
    FOR EACH STATEMENT EXECUTE FUNCTION toolwarden_changed();

-- A confirmation settled anywhere wakes the replica whose caller waits on it.
CREATE FUNCTION toolwarden_confirmation_settled() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.state <> 'pending' AND OLD.state = 'pending' THEN
        PERFORM pg_notify('toolwarden_confirmations', NEW.id);
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER confirmations_settled AFTER UPDATE OF state ON confirmations
    FOR EACH ROW EXECUTE FUNCTION toolwarden_confirmation_settled();

-- The logs are append-only.
CREATE FUNCTION toolwarden_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION '% is append-only', TG_TABLE_NAME;
END $$;
CREATE TRIGGER audit_log_append_only BEFORE UPDATE OR DELETE ON audit_log
    FOR EACH ROW EXECUTE FUNCTION toolwarden_append_only();
CREATE TRIGGER admin_log_append_only BEFORE UPDATE OR DELETE ON admin_log
    FOR EACH ROW EXECUTE FUNCTION toolwarden_append_only();
CREATE TRIGGER audit_checkpoints_append_only BEFORE UPDATE OR DELETE ON audit_checkpoints
    FOR EACH ROW EXECUTE FUNCTION toolwarden_append_only();
