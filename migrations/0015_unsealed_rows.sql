-- Every store asks, each time it opens, whether any audit or admin row still waits to be sealed
-- into the hash chain (docs/decisions/0035-verifiable-audit-log.md). Without an index that
-- question reads the whole log, which every CLI command paid. These partial indexes hold only
-- rows without a link: none once the rows from before the chain are sealed, so the question is
-- one seek and an append never writes to them.
CREATE INDEX audit_log_unsealed ON audit_log (id) WHERE hash IS NULL;
CREATE INDEX admin_log_unsealed ON admin_log (id) WHERE hash IS NULL;
