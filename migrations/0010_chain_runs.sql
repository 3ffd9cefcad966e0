-- Tool chains (issue 19). A chain run is a call of the tool `chain__NAME`; its id is that call's
-- execution id, so the call's own audit row and the run record name each other without a join
-- table. Every step is a governed call with its own audit row, which carries the run and the
-- step in its metadata (`{"chain": {"run_id", "step", "attempt", "item"}}`, written by the
-- pipeline like every other execution fact). The two generated columns below read them back
-- out so that "the steps of run X" is an index lookup, without the audit writer knowing about
-- chains. VIRTUAL: computed on read, so existing rows cost nothing and stay as written (the log
-- is append-only; adding a computed column changes no row).
ALTER TABLE audit_log ADD COLUMN chain_run_id TEXT
    GENERATED ALWAYS AS (json_extract(metadata, '$.chain.run_id')) VIRTUAL;
ALTER TABLE audit_log ADD COLUMN chain_step TEXT
    GENERATED ALWAYS AS (json_extract(metadata, '$.chain.step')) VIRTUAL;
CREATE INDEX audit_log_chain_run ON audit_log (chain_run_id, id) WHERE chain_run_id IS NOT NULL;

-- One row per run: what was asked, how it ended, and each step's status and timing as a JSON
-- array ({id, status, started_at, completed_at, attempts, execution_ids, error}). Written when
-- the run starts (status 'running') and once more when it ends, before the chain call's answer
-- goes out. A run a crash cut short stays 'running' ('interrupted' is kept for marking those once
-- the runtime can tell a dead run from another process's live one).
CREATE TABLE chain_runs (
    id           TEXT    PRIMARY KEY CHECK (length(id) BETWEEN 1 AND 128),
    chain        TEXT    NOT NULL CHECK (length(chain) BETWEEN 1 AND 64),
    trace_id     TEXT    NOT NULL,
    agent_id     TEXT    NOT NULL,
    skill        TEXT,
    user_id      TEXT,
    status       TEXT    NOT NULL CHECK (status IN
                     ('running', 'completed', 'failed', 'cancelled', 'timeout', 'interrupted')),
    input        TEXT    NOT NULL CHECK (json_valid(input)),
    output       TEXT    CHECK (output IS NULL OR json_valid(output)),
    error        TEXT,
    steps        TEXT    NOT NULL CHECK (
        CASE WHEN json_valid(steps) THEN json_type(steps) = 'array' ELSE 0 END
    ),
    started_at   INTEGER NOT NULL,
    completed_at INTEGER
) STRICT;

CREATE INDEX chain_runs_started ON chain_runs (started_at DESC);
CREATE INDEX chain_runs_chain ON chain_runs (chain, started_at DESC);
