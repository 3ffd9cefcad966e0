-- The audit tail moves to a file of its own, `<store>.tail` (tw-store's `tail` module; decision
-- 0033): appends then never wait for a move of the tail into audit_log, which writes this file.
-- Rows a process left in the old tail move into audit_log here, as the store's move would have
-- moved them (their links were computed when they were written); the store makes the new tail's
-- file itself when it opens.
INSERT INTO audit_log (id, prev, hash, execution_id, trace_id, tool, agent_id, skill, user_id,
    arguments, decision, explanation, status, error_code, error_message, output, output_sha256,
    output_bytes, truncated, started_at, completed_at, duration_us, metadata, violation_type,
    violation_severity)
SELECT id, prev, hash, execution_id, trace_id, tool, agent_id, skill, user_id,
    arguments, decision, explanation, status, error_code, error_message, output, output_sha256,
    output_bytes, truncated, started_at, completed_at, duration_us, metadata, violation_type,
    violation_severity
FROM main.audit_tail ORDER BY id;
DROP TABLE main.audit_tail;
