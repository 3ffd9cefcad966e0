-- Agents' memory (`memory_put`, `memory_get`, `memory_search`, `memory_delete`): small values an
-- agent keeps between calls, by key, in a namespace of its own per skill (`skill` is '' for calls
-- made under none). The quotas (entries and bytes per namespace, bytes per entry) are checked in
-- the transaction that writes, so two agents racing for the last slot cannot both get it.
--
-- `value` is the JSON the agent stored; `body` is what search reads of it (its strings and
-- numbers, in order); `tags` are the entry's tags between spaces (' a b '), so one tag is found
-- with LIKE '% a %'. An entry with `expires_at` is invisible from that moment and removed by the
-- next write to any namespace.
--
-- `memory_text` indexes key, body and tags for full-text search (FTS5, unicode61 words without
-- diacritics), kept in step by the triggers below; it holds no copy of the text. The id is an
-- INTEGER PRIMARY KEY so VACUUM keeps the rowids the index refers to.

CREATE TABLE memory (
    id         INTEGER PRIMARY KEY,
    agent      TEXT    NOT NULL CHECK (length(agent) BETWEEN 1 AND 128),
    skill      TEXT    NOT NULL CHECK (length(skill) <= 128),
    key        TEXT    NOT NULL CHECK (length(key) BETWEEN 1 AND 256),
    value      TEXT    NOT NULL,
    body       TEXT    NOT NULL,
    tags       TEXT    NOT NULL,
    bytes      INTEGER NOT NULL CHECK (bytes > 0),
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    expires_at INTEGER,
    UNIQUE (agent, skill, key)
) STRICT;

CREATE INDEX memory_expiry ON memory (expires_at) WHERE expires_at IS NOT NULL;
CREATE INDEX memory_recent ON memory (agent, skill, updated_at);

CREATE VIRTUAL TABLE memory_text USING fts5(
    key, body, tags,
    content = 'memory', content_rowid = 'id',
    tokenize = 'unicode61 remove_diacritics 2'
);

CREATE TRIGGER memory_text_insert AFTER INSERT ON memory BEGIN
    INSERT INTO memory_text (rowid, key, body, tags) VALUES (new.id, new.key, new.body, new.tags);
END;
CREATE TRIGGER memory_text_delete AFTER DELETE ON memory BEGIN
    INSERT INTO memory_text (memory_text, rowid, key, body, tags)
        VALUES ('delete', old.id, old.key, old.body, old.tags);
END;
CREATE TRIGGER memory_text_update AFTER UPDATE ON memory BEGIN
    INSERT INTO memory_text (memory_text, rowid, key, body, tags)
        VALUES ('delete', old.id, old.key, old.body, old.tags);
    INSERT INTO memory_text (rowid, key, body, tags) VALUES (new.id, new.key, new.body, new.tags);
END;
