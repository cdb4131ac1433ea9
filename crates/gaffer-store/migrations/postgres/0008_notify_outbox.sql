-- The notification outbox: one row per (target, thing to tell), written before
-- anything is sent, so a crash neither loses a notification nor sends it twice
-- beyond at-least-once (a crash between a receiver's 2xx and `delivered` being
-- recorded sends it again, with the same id). Not part of the journal: no event
-- depends on it.
CREATE TABLE notify_outbox (
    id           TEXT PRIMARY KEY,          -- idempotency id: `<target>/<what>/<gaffer id>`
    target       TEXT NOT NULL,
    payload      TEXT NOT NULL,             -- what to tell, as JSON (no secret, no link)
    created_at   BIGINT NOT NULL,
    attempts     BIGINT NOT NULL DEFAULT 0,
    next_at      BIGINT NOT NULL,           -- not tried again before (ms)
    state        TEXT NOT NULL DEFAULT 'pending', -- pending | delivered | failed
    delivered_at BIGINT,
    last_error   TEXT NOT NULL DEFAULT ''
);
CREATE INDEX notify_outbox_due ON notify_outbox (state, next_at);

-- How far the notifier has read the journal (one row).
CREATE TABLE notify_cursor (
    id  INTEGER PRIMARY KEY,
    pos BIGINT NOT NULL
);
