-- Workers and their task leases (many workers, one journal). Operational state,
-- not part of the journal: acquisitions are also recorded as `task_leased` events.

-- Every worker process that ever registered; live while heartbeat_at is recent.
CREATE TABLE workers (
    id           TEXT PRIMARY KEY,                -- host/pid/random
    host         TEXT    NOT NULL,
    pid          BIGINT NOT NULL,
    lease_ms     BIGINT NOT NULL,                -- how long its leases last without a heartbeat
    started_at   BIGINT NOT NULL,                -- ms since the Unix epoch (database clock)
    heartbeat_at BIGINT NOT NULL,
    stopped_at   BIGINT,                         -- set by a clean shutdown
    tasks_run    BIGINT NOT NULL DEFAULT 0,      -- tasks this worker ran to an end
    failures     BIGINT NOT NULL DEFAULT 0       -- of those, ended failed/blocked or stopped by an error
);

-- One row per task ever leased. The generation only grows: it is the fence every
-- append of the holder carries.
CREATE TABLE task_leases (
    task_id     TEXT PRIMARY KEY,
    worker_id   TEXT    NOT NULL,
    generation  BIGINT NOT NULL,
    acquired_at BIGINT NOT NULL,
    expires_at  BIGINT NOT NULL                  -- 0 once released
);
CREATE INDEX task_leases_worker ON task_leases (worker_id);

-- Which lease (if any) each event was appended under.
ALTER TABLE events ADD COLUMN worker_id TEXT;
ALTER TABLE events ADD COLUMN lease_generation BIGINT;
