-- Tools imported from other MCP servers ("upstream" servers), pinned: the first time Toolwarden
-- registers an upstream tool, the fingerprint (SHA-256 of its name, description and schemas,
-- keys sorted) and the definition itself are kept. When the server later describes the tool
-- differently (a changed description is how a "rug pull" or tool poisoning reaches an agent),
-- the new definition is kept beside the pinned one (`pending_*`) and the tool is quarantined: no
-- call reaches it until an administrator reviews the difference and accepts it
-- (`toolwarden mcp review`). Accepting moves the pending definition into the pin; the change and
-- who made it go to admin_log (`upstream_pin_accepted`) in the same transaction.
--
-- One row per server and tool (the upstream's own tool name). Shared by every process on the
-- data directory, so a review in the CLI frees the tool in a running `toolwarden serve`.

CREATE TABLE upstream_pins (
    server             TEXT    NOT NULL CHECK (length(server) BETWEEN 1 AND 64),
    tool               TEXT    NOT NULL CHECK (length(tool) BETWEEN 1 AND 256),
    definition_hash    TEXT    NOT NULL CHECK (length(definition_hash) = 64),
    definition         TEXT    NOT NULL CHECK (json_valid(definition)),
    pinned_at          INTEGER NOT NULL,
    pinned_by          TEXT    NOT NULL,
    pending_hash       TEXT    CHECK (pending_hash IS NULL OR length(pending_hash) = 64),
    pending_definition TEXT    CHECK (pending_definition IS NULL OR json_valid(pending_definition)),
    pending_since      INTEGER,
    PRIMARY KEY (server, tool),
    CHECK ((pending_hash IS NULL) = (pending_definition IS NULL)),
    CHECK ((pending_hash IS NULL) = (pending_since IS NULL))
) STRICT;
