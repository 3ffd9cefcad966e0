-- Which process runs a chain run (issue 19), so that a run a crash cut short can be told from
-- another process's live one: "BOOT_ID:PID:START_TICKS" (the kernel's boot id, the pid, and the
-- process's start time in clock ticks since boot, so a reused pid or a reboot reads as gone). A
-- runtime that opens the store marks the 'running' runs whose owner is gone 'interrupted'. Rows
-- written before this column have no owner and count as gone.
ALTER TABLE chain_runs ADD COLUMN owner TEXT;
CREATE INDEX chain_runs_running ON chain_runs (id) WHERE status = 'running';
