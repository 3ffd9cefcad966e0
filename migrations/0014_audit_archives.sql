-- Retention (issue 21; docs/decisions/0035-verifiable-audit-log.md): the oldest audit records
-- written to an archive file, verified, and only then removed. Each archive the store wrote is
-- recorded here, with its signed header (tw-store's `archive` has the format), before any of its
-- records is removed; the log then goes on from `last_hash`.
CREATE TABLE audit_archives (
    id         INTEGER PRIMARY KEY,
    created_at INTEGER NOT NULL,
    before     INTEGER NOT NULL,
    first_id   INTEGER NOT NULL,
    last_id    INTEGER NOT NULL CHECK (last_id >= first_id),
    prev       BLOB    NOT NULL CHECK (length(prev) = 32),
    last_hash  BLOB    NOT NULL CHECK (length(last_hash) = 32),
    records    INTEGER NOT NULL,
    public_key BLOB    NOT NULL CHECK (length(public_key) = 32),
    signature  BLOB    NOT NULL CHECK (length(signature) = 64),
    -- Where it was written, as a path on the machine that wrote it.
    file       TEXT    NOT NULL
) STRICT;

CREATE TRIGGER audit_archives_no_update BEFORE UPDATE ON audit_archives
BEGIN
    SELECT RAISE(ABORT, 'archive records are append-only');
END;
CREATE TRIGGER audit_archives_no_delete BEFORE DELETE ON audit_archives
BEGIN
    SELECT RAISE(ABORT, 'archive records are append-only');
END;

-- A record may be removed only once an archive holding it is recorded above.
DROP TRIGGER audit_log_no_delete;
CREATE TRIGGER audit_log_no_delete BEFORE DELETE ON audit_log
WHEN OLD.id > (SELECT COALESCE(MAX(last_id), 0) FROM audit_archives)
BEGIN
    SELECT RAISE(ABORT, 'the audit log is append-only: only records in a written, verified archive may be removed');
END;
