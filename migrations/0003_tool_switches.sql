-- Tools an administrator switched off for a license tier at run time (`toolwarden tools disable`,
-- the desktop app's tool switches), shared by every process on the data directory. A row means
-- "off for this tier"; switching the tool back on deletes the row. Who changed what, and when, is
-- also kept for good in admin_log (`tool_disabled`, `tool_enabled`).
-- A table rather than a JSON setting: one row per tool and tier carries its own who and when, a
-- switch is one atomic INSERT or DELETE (two processes switching different tools cannot lose
-- each other's change), the schema refuses a tier it does not know, and a build older than this
-- migration refuses the file instead of running tools it cannot see are switched off.

CREATE TABLE tool_switches (
    tool        TEXT    NOT NULL CHECK (length(tool) BETWEEN 1 AND 128),
    tier        TEXT    NOT NULL CHECK (tier IN ('core', 'pro', 'teams', 'enterprise')),
    disabled_at INTEGER NOT NULL,
    disabled_by TEXT    NOT NULL,
    PRIMARY KEY (tool, tier)
) STRICT;
