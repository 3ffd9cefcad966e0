-- Change counters: one row per table that every runtime on the data directory follows (the
-- mode and other settings, tool switches, skill overrides, tool classifications, custom tools,
-- upstream pins). Triggers bump a table's counter on every insert, update and delete, so a
-- runtime learns with one query of six rows a second which tables another process changed,
-- and re-reads only those, instead of re-reading each table every second.
CREATE TABLE change_counters (
    name TEXT PRIMARY KEY NOT NULL,
    counter INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;

INSERT INTO change_counters (name) VALUES
    ('settings'), ('tool_switches'), ('skill_overrides'), ('tool_classifications'),
    ('custom_tools'), ('upstream_pins');

CREATE TRIGGER settings_inserted AFTER INSERT ON settings BEGIN
    UPDATE change_counters SET counter = counter + 1 WHERE name = 'settings'; END;
CREATE TRIGGER settings_updated AFTER UPDATE ON settings BEGIN
    UPDATE change_counters SET counter = counter + 1 WHERE name = 'settings'; END;
CREATE TRIGGER settings_deleted AFTER DELETE ON settings BEGIN
    UPDATE change_counters SET counter = counter + 1 WHERE name = 'settings'; END;

CREATE TRIGGER tool_switches_inserted AFTER INSERT ON tool_switches BEGIN
    UPDATE change_counters SET counter = counter + 1 WHERE name = 'tool_switches'; END;
CREATE TRIGGER tool_switches_updated AFTER UPDATE ON tool_switches BEGIN
    UPDATE change_counters SET counter = counter + 1 WHERE name = 'tool_switches'; END;
CREATE TRIGGER tool_switches_deleted AFTER DELETE ON tool_switches BEGIN
    UPDATE change_counters SET counter = counter + 1 WHERE name = 'tool_switches'; END;

CREATE TRIGGER skill_overrides_inserted AFTER INSERT ON skill_overrides BEGIN
    UPDATE change_counters SET counter = counter + 1 WHERE name = 'skill_overrides'; END;
CREATE TRIGGER skill_overrides_updated AFTER UPDATE ON skill_overrides BEGIN
    UPDATE change_counters SET counter = counter + 1 WHERE name = 'skill_overrides'; END;
CREATE TRIGGER skill_overrides_deleted AFTER DELETE ON skill_overrides BEGIN
    UPDATE change_counters SET counter = counter + 1 WHERE name = 'skill_overrides'; END;

CREATE TRIGGER tool_classifications_inserted AFTER INSERT ON tool_classifications BEGIN
    UPDATE change_counters SET counter = counter + 1 WHERE name = 'tool_classifications'; END;
CREATE TRIGGER tool_classifications_updated AFTER UPDATE ON tool_classifications BEGIN
    UPDATE change_counters SET counter = counter + 1 WHERE name = 'tool_classifications'; END;
CREATE TRIGGER tool_classifications_deleted AFTER DELETE ON tool_classifications BEGIN
    UPDATE change_counters SET counter = counter + 1 WHERE name = 'tool_classifications'; END;

CREATE TRIGGER custom_tools_inserted AFTER INSERT ON custom_tools BEGIN
    UPDATE change_counters SET counter = counter + 1 WHERE name = 'custom_tools'; END;
CREATE TRIGGER custom_tools_updated AFTER UPDATE ON custom_tools BEGIN
    UPDATE change_counters SET counter = counter + 1 WHERE name = 'custom_tools'; END;
CREATE TRIGGER custom_tools_deleted AFTER DELETE ON custom_tools BEGIN
    UPDATE change_counters SET counter = counter + 1 WHERE name = 'custom_tools'; END;

CREATE TRIGGER upstream_pins_inserted AFTER INSERT ON upstream_pins BEGIN
    UPDATE change_counters SET counter = counter + 1 WHERE name = 'upstream_pins'; END;
CREATE TRIGGER upstream_pins_updated AFTER UPDATE ON upstream_pins BEGIN
    UPDATE change_counters SET counter = counter + 1 WHERE name = 'upstream_pins'; END;
CREATE TRIGGER upstream_pins_deleted AFTER DELETE ON upstream_pins BEGIN
    UPDATE change_counters SET counter = counter + 1 WHERE name = 'upstream_pins'; END;
