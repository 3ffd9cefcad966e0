-- What skills reach through capabilities, kept across restarts and shared by every process on the
-- data directory.
--
-- tool_classifications: a skill's `permissions` name capabilities (web_read, fs_write, ...), and
-- every registered tool is classified into capabilities once: by the catalog's static map, a
-- language model or a keyword heuristic, or set by an administrator. Asking a model again on every
-- start would be slow, cost money and could give a different answer, so the answer is kept here
-- with the fingerprint of the definition it was made from (`definition_hash`): a changed
-- definition is classified again. One row per tool, the answer in force. An administrator's row
-- ('admin') is never replaced by a machine's; the store enforces that in one statement, so two
-- processes classifying at once cannot undo an administrator's choice. `capabilities` is a JSON
-- array of {"capability": name, "confidence": 0 to 1}: the list is read and written whole, never
-- queried by capability (the runtime indexes it in memory).
--
-- skill_overrides: an administrator adds a tool to a skill or removes one, whatever its SKILL.md
-- and capabilities say. One row per skill and tool; a removal carries no access level (it grants
-- nothing). Who changed what, and when, is also kept for good in admin_log (`tool_classified`,
-- `tool_classification_cleared`, `skill_override_set`, `skill_override_cleared`), written in the
-- same transaction as the change.
--
-- Tables rather than JSON settings for the same reasons as tool_switches (0003): each row carries
-- its own who and when, a change is one atomic statement, the schema refuses words it does not
-- know, and a build older than this migration refuses the file instead of ignoring overrides.

CREATE TABLE tool_classifications (
    tool            TEXT    PRIMARY KEY CHECK (length(tool) BETWEEN 1 AND 128),
    definition_hash TEXT    NOT NULL,
    source          TEXT    NOT NULL CHECK (source IN ('static', 'llm', 'heuristic', 'admin')),
    -- CASE, not AND: json_type raises "malformed JSON" on text that is not JSON, where the CHECK
    -- should fail by name.
    capabilities    TEXT    NOT NULL CHECK (
        CASE WHEN json_valid(capabilities) THEN json_type(capabilities) = 'array' ELSE 0 END
    ),
    detail          TEXT,
    classified_at   INTEGER NOT NULL,
    classified_by   TEXT    NOT NULL
) STRICT;

CREATE TABLE skill_overrides (
    skill        TEXT    NOT NULL CHECK (length(skill) BETWEEN 1 AND 64),
    tool         TEXT    NOT NULL CHECK (length(tool) BETWEEN 1 AND 128),
    action       TEXT    NOT NULL CHECK (action IN ('add', 'remove')),
    access_level TEXT    CHECK (access_level IN ('standard', 'elevated', 'admin')),
    reason       TEXT,
    created_at   INTEGER NOT NULL,
    created_by   TEXT    NOT NULL,
    PRIMARY KEY (skill, tool),
    CHECK (action = 'add' OR access_level IS NULL)
) STRICT;
