-- Schedules created at run time (`POST /api/schedules`, `gaffer schedules add`);
-- the config's `[[schedules]]` stay in the config file. Not journal events: no task
-- depends on them, and each slot a schedule ran is already a task whose origin key
-- `schedule:<name>:<slot>` keeps it from running twice, also for a name removed
-- and added again. A removed schedule keeps its row (who removed it, and when); a
-- name is unique among the schedules not removed. Actors are stored as JSON.
CREATE TABLE api_schedules (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    name       TEXT NOT NULL,
    cron       TEXT NOT NULL,
    tz         TEXT NOT NULL,
    project    TEXT NOT NULL,
    request    TEXT NOT NULL,
    agent      TEXT,
    missed     TEXT NOT NULL,            -- skip | run_once
    created_at INTEGER NOT NULL,
    created_by TEXT NOT NULL,
    removed_at INTEGER,
    removed_by TEXT
);
CREATE UNIQUE INDEX api_schedules_live_name ON api_schedules (name) WHERE removed_at IS NULL;
