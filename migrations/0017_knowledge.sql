-- The team's knowledge store (`create_entity`, `search_knowledge`; teams tier): entities, each a
-- name of a kind (`service`, `person`, `runbook`, ...) with a description and properties, and
-- named relations between them (`owns`, `depends_on`). Unlike an agent's memory it is shared:
-- every agent reads what any wrote, and each row says which agent wrote it last.
--
-- `body` is what search reads of the properties (their keys and strings). `knowledge_text`
-- indexes name, kind, description and body (FTS5, as memory_text does), kept by triggers.

CREATE TABLE knowledge_entities (
    id          INTEGER PRIMARY KEY,
    kind        TEXT    NOT NULL CHECK (length(kind) BETWEEN 1 AND 64),
    name        TEXT    NOT NULL CHECK (length(name) BETWEEN 1 AND 256),
    description TEXT    NOT NULL,
    properties  TEXT    NOT NULL,
    body        TEXT    NOT NULL,
    created_at  INTEGER NOT NULL,
    created_by  TEXT    NOT NULL,
    updated_at  INTEGER NOT NULL,
    updated_by  TEXT    NOT NULL,
    UNIQUE (kind, name)
) STRICT;

CREATE TABLE knowledge_relations (
    source     INTEGER NOT NULL REFERENCES knowledge_entities (id) ON DELETE CASCADE,
    relation   TEXT    NOT NULL CHECK (length(relation) BETWEEN 1 AND 64),
    target     INTEGER NOT NULL REFERENCES knowledge_entities (id) ON DELETE CASCADE,
    created_at INTEGER NOT NULL,
    created_by TEXT    NOT NULL,
    PRIMARY KEY (source, relation, target)
) STRICT;

CREATE INDEX knowledge_relations_target ON knowledge_relations (target);

CREATE VIRTUAL TABLE knowledge_text USING fts5(
    name, kind, description, body,
    content = 'knowledge_entities', content_rowid = 'id',
    tokenize = 'unicode61 remove_diacritics 2'
);

CREATE TRIGGER knowledge_text_insert AFTER INSERT ON knowledge_entities BEGIN
    INSERT INTO knowledge_text (rowid, name, kind, description, body)
        VALUES (new.id, new.name, new.kind, new.description, new.body);
END;
CREATE TRIGGER knowledge_text_delete AFTER DELETE ON knowledge_entities BEGIN
    INSERT INTO knowledge_text (knowledge_text, rowid, name, kind, description, body)
        VALUES ('delete', old.id, old.name, old.kind, old.description, old.body);
END;
CREATE TRIGGER knowledge_text_update AFTER UPDATE ON knowledge_entities BEGIN
    INSERT INTO knowledge_text (knowledge_text, rowid, name, kind, description, body)
        VALUES ('delete', old.id, old.name, old.kind, old.description, old.body);
    INSERT INTO knowledge_text (rowid, name, kind, description, body)
        VALUES (new.id, new.name, new.kind, new.description, new.body);
END;
