-- Which replicas have someone watching every call (the desktop's live view, /api/v1/events on
-- that replica), and until when (µs since the epoch). The other replicas send their calls'
-- events over NOTIFY only while some row is live, so a team nobody watches sends nothing. A
-- replica renews its row while it has watchers and removes it when the last one leaves; the row
-- of a replica that died expires by itself. Team-only: on SQLite the processes of one data
-- directory watch each other through its live sockets (tw_runtime::live).
CREATE TABLE live_watchers (
    replica TEXT   PRIMARY KEY,
    until   BIGINT NOT NULL
);
