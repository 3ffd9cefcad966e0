-- Indexes for the desktop app's audit log viewer. Its filters (tool, status, caller, skill, a time
-- range, alone or together) page newest first, 50 rows at a time, and a page should take at most
-- 50 ms on a big log. Figures from crates/tw-store/benches/audit_query.rs on a 1,000,000-row log
-- (30 days, 30 tools, 10 callers), median ms a page, before -> after this migration together
-- with the page query that picks the page's ids first (query.rs):
--   skill = a skill in no row                      725   -> 0.12
--   skill = security-audit (0.5% of rows)           10.7 -> 0.94
--   tool = read_file + status = timeout (no row)    34.9 -> 0.13
--   1-day range + tool = exec                      189   -> 2.0
--   1-day range + caller = ci-bot                  247   -> 2.5
-- (A 1-day range alone, 160 -> 8 ms, needs no new index: the ids-first query sorts the ids that
-- audit_log_started finds instead of whole rows.) The four indexes took 8 s to build on that
-- file, when the store first opened it, and grew it from 1282 to 1378 MiB. The indexes of 0001
-- and 0002 stay: each still serves its filter alone, in id order.

-- No index served the skill filter: a page read the log newest first until 51 rows of the skill
-- turned up, all of it for a skill with few or no calls.
CREATE INDEX audit_log_skill ON audit_log (skill, id);

-- Tool and status together: the tool's index alone read every call of the tool to find a rare
-- status.
CREATE INDEX audit_log_tool_status ON audit_log (tool, status, id);

-- A time range with a tool or a caller: the tool's (caller's) index alone read its calls from now
-- back to the range. With these the page's ids come from the index alone, and only they are
-- sorted.
CREATE INDEX audit_log_tool_started ON audit_log (tool, started_at);
CREATE INDEX audit_log_agent_started ON audit_log (agent_id, started_at);
