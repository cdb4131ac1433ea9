-- Requests per day, per provider and model: rate limits hold across restarts and
-- across every gaffer process sharing this database. Not part of the journal.
CREATE TABLE rate_counters (
    key   TEXT NOT NULL,
    day   TEXT NOT NULL,
    count BIGINT NOT NULL,
    PRIMARY KEY (key, day)
);
