-- Indexes for the desktop app's audit log viewer. Its filters (tool, status, caller, skill, a time
-- range, alone or together) page newest first, 50 rows at a time, and a page should take at most
-- 50 ms on a big log. Figures from crates/tw-store/benches/audit_query.rs on a 1,000,000-row log
-- (30 days, 30 tools, 10 callers, built through Store::append), median ms a page, before -> after
-- this migration together with the page queries of query.rs (p95 in brackets):
--   skill = a skill in no row                      725   -> 0.13 (0.17)
--   skill = security-audit (0.5% of rows)           10.7 -> 2.3  (3.1)
--   tool = read_file + status = timeout (no row)    34.9 -> 0.22 (0.30)
--   up to day 15 (no start)                        339   -> 3.4  (4.8)
--   7-day range, days 8 to 14                       42   -> 4.3  (5.4)
--   1-day range, day 15                            160   -> 4.2  (5.8)
--   1-day range (day 15) + tool = exec             189   -> 3.5  (4.6)
--   1-day range (day 15) + caller = ci-bot         247   -> 3.2  (3.9)
-- and every time range the bench tries (1 hour to 20 days at the top, middle and old end, open
-- at either end, below a deep cursor, with a tool or a caller) takes 2.6 to 7.2 ms (p95 <= 9.1).
-- A time range with a status has a block index too (1-day range (day 15) + status =
-- permission_denied: 81 ms -> 3.2 ms, p95 3.7). A range with a skill, or with two of tool, caller
-- and status, goes by one filter's own index and reads rows for their start.
-- On that log the indexes here take about 160 MiB (the block indexes 21, 31, 31 and about 29
-- MiB; the file is 1446 MiB, 1517 bytes a row); created on
-- an existing 1,000,000-row file the three block indexes took 12 s. Appending 50,000 rows to it
-- in commits of 1,000 took 4.2 s with them and with the (tool, started_at) and (agent_id,
-- started_at) indexes they replace: no difference beyond the noise (+-10%). The indexes of 0001
-- and 0002 stay: each still serves its filter alone, in id order, and audit_log_started counts a
-- time range.

-- No index served the skill filter: a page read the log newest first until 51 rows of the skill
-- turned up, all of it for a skill with few or no calls.
CREATE INDEX audit_log_skill ON audit_log (skill, id);

-- Tool and status together: the tool's index alone read every call of the tool to find a rare
-- status.
CREATE INDEX audit_log_tool_status ON audit_log (tool, status, id);

-- A time range, alone or with a tool or a caller: the block indexes. No index gives a time
-- range's ids newest first. Reading ids down from the cursor until the range shows up reads
-- every row above it (up to day 15: 339 ms; a covering (id, started_at) index only brings that
-- to 38 ms, and it grows with the log); taking the range from audit_log_started, or the tool's
-- (caller's) (x, started_at) index, sorts every id in it (a 7-day range: 233,000 ids, 42 ms;
-- up to day 15 + tool = read_file: 120,000 ids, 37 to 62 ms in the sqlite3 shell). Guessing an
-- id bound from started_at cannot be exact: a long call is written, and numbered, after shorter
-- ones that started later.
-- So the log is cut into blocks of 4096 ids (`id >> 12`, which query.rs must spell the same) and
-- these indexes hold each block's starts in order: one seek finds a block's rows in a range. A
-- page walks the blocks down from its cursor, counting their matches (245 blocks on 1,000,000
-- rows; an empty one is one seek) until it has a page's worth, and sorts only the ids of the
-- blocks it walked, which hold every id of the page whatever the order of the starts.
CREATE INDEX audit_log_block_started ON audit_log (id >> 12, started_at);
CREATE INDEX audit_log_tool_block ON audit_log (tool, id >> 12, started_at);
CREATE INDEX audit_log_agent_block ON audit_log (agent_id, id >> 12, started_at);
-- And with a status (a day's denials): by the status's own index, a page read rows for their
-- start until the range showed up (1-day range, day 15, + permission_denied: 81 ms).
CREATE INDEX audit_log_status_block ON audit_log (status, id >> 12, started_at);
