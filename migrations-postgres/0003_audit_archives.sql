-- Retention on the team store (issue 21; docs/decisions/0036-team-store.md): the oldest audit
-- records written to an archive file, verified, and only then removed, as on SQLite (0014 there).
-- Each writer appends to a chain of its own, so an archive holds a prefix of every chain: one row
-- here per archive (its signed header; tw-store's `archive` has the format, version 2) and one in
-- audit_archive_chains per chain it holds a part of. Both are written before any of its records
-- is removed; each chain then goes on from its part's `last_hash`. An archive SQLite wrote
-- (format 1, one chain by id) comes along when `store migrate` copies its store: its one row in
-- audit_archive_chains names the chain the copy became.
CREATE TABLE audit_archives (
    id         BIGINT  GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    format     SMALLINT NOT NULL CHECK (format IN (1, 2)),
    created_at BIGINT  NOT NULL,
    before     BIGINT  NOT NULL,
    first_id   BIGINT  NOT NULL,
    last_id    BIGINT  NOT NULL CHECK (last_id >= first_id),
    records    BIGINT  NOT NULL CHECK (records >= 1),
    public_key BYTEA   NOT NULL CHECK (length(public_key) = 32),
    signature  BYTEA   NOT NULL CHECK (length(signature) = 64),
    -- Where it was written: a path on the host that wrote it.
    host       TEXT    NOT NULL,
    file       TEXT    NOT NULL
);

CREATE TABLE audit_archive_chains (
    archive    BIGINT  NOT NULL REFERENCES audit_archives (id),
    chain      TEXT    NOT NULL,
    first_seq  BIGINT  NOT NULL CHECK (first_seq >= 1),
    last_seq   BIGINT  NOT NULL CHECK (last_seq >= first_seq),
    records    BIGINT  NOT NULL CHECK (records = last_seq - first_seq + 1),
    prev       BYTEA   NOT NULL CHECK (length(prev) = 32),
    last_hash  BYTEA   NOT NULL CHECK (length(last_hash) = 32),
    PRIMARY KEY (chain, last_seq),
    UNIQUE (archive, chain)
);

CREATE TRIGGER audit_archives_append_only BEFORE UPDATE OR DELETE ON audit_archives
    FOR EACH ROW EXECUTE FUNCTION toolwarden_append_only();
CREATE TRIGGER audit_archive_chains_append_only BEFORE UPDATE OR DELETE ON audit_archive_chains
    FOR EACH ROW EXECUTE FUNCTION toolwarden_append_only();

-- A record may be removed only once an archive holding its place in its chain is recorded above;
-- it is never changed.
CREATE FUNCTION toolwarden_audit_log_guard() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' AND OLD.seq <= (
        SELECT COALESCE(MAX(last_seq), 0) FROM audit_archive_chains WHERE chain = OLD.chain
    ) THEN
        RETURN OLD;
    END IF;
    IF TG_OP = 'DELETE' THEN
        RAISE EXCEPTION 'the audit log is append-only: only records in a written, verified archive may be removed';
    END IF;
    RAISE EXCEPTION 'audit_log is append-only';
END $$;
DROP TRIGGER audit_log_append_only ON audit_log;
CREATE TRIGGER audit_log_append_only BEFORE UPDATE OR DELETE ON audit_log
    FOR EACH ROW EXECUTE FUNCTION toolwarden_audit_log_guard();
