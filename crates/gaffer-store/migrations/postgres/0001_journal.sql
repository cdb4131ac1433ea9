-- The journal: append-only, hash-chained events, one stream per task or project.
-- The same schema as SQLite's (migrations/sqlite), in PostgreSQL types.
CREATE TABLE events (
    pos        BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY, -- global order
    stream_id  TEXT   NOT NULL,
    seq        BIGINT NOT NULL,                  -- 1, 2, … within the stream
    at         BIGINT NOT NULL,                  -- ms since the Unix epoch
    type       TEXT   NOT NULL,
    payload    TEXT   NOT NULL,                  -- the event as JSON, exactly as hashed
    prev_hash  TEXT   NOT NULL,                  -- hash of the previous event of the stream
    hash       TEXT   NOT NULL,                  -- SHA-256 over prev_hash and this event
    UNIQUE (stream_id, seq)
);

-- Projections: derived from events alone, updated in the same transaction.

CREATE TABLE projects (
    id            TEXT PRIMARY KEY,
    name          TEXT    NOT NULL UNIQUE,
    path          TEXT    NOT NULL UNIQUE,
    check_command TEXT,
    auto_approve  BOOLEAN NOT NULL,
    created_at    BIGINT  NOT NULL,
    updated_at    BIGINT  NOT NULL
);

CREATE TABLE tasks (
    id          TEXT PRIMARY KEY,
    project_id  TEXT    NOT NULL REFERENCES projects (id),
    request     TEXT    NOT NULL,
    stage       TEXT    NOT NULL,
    created_by  TEXT    NOT NULL,
    options     TEXT    NOT NULL,
    outcome     TEXT,
    created_at  BIGINT  NOT NULL,
    updated_at  BIGINT  NOT NULL
);
CREATE INDEX tasks_by_project ON tasks (project_id, created_at);
CREATE INDEX tasks_by_stage ON tasks (stage, created_at);

CREATE TABLE steps (
    task_id     TEXT    NOT NULL REFERENCES tasks (id),
    step_id     TEXT    NOT NULL,
    ord         BIGINT  NOT NULL,
    name        TEXT    NOT NULL,
    intent      TEXT    NOT NULL,
    state       TEXT    NOT NULL,
    attempt     BIGINT  NOT NULL,
    depends_on  TEXT    NOT NULL,
    input       TEXT    NOT NULL,
    receipt     TEXT,
    error       TEXT,
    recorded_at BIGINT  NOT NULL,
    updated_at  BIGINT  NOT NULL,
    PRIMARY KEY (task_id, step_id)
);

CREATE TABLE approvals (
    id           TEXT PRIMARY KEY,
    task_id      TEXT    NOT NULL REFERENCES tasks (id),
    project_id   TEXT    NOT NULL,
    step_id      TEXT    NOT NULL,
    attempt      BIGINT  NOT NULL,
    kind         TEXT    NOT NULL,
    summary      TEXT    NOT NULL,
    details      TEXT    NOT NULL,
    state        TEXT    NOT NULL,
    decided_by   TEXT,
    note         TEXT,
    requested_at BIGINT  NOT NULL,
    decided_at   BIGINT,
    UNIQUE (task_id, step_id, attempt)
);
CREATE INDEX approvals_by_state ON approvals (state, requested_at);

CREATE TABLE sessions (
    id               TEXT PRIMARY KEY,
    task_id          TEXT    NOT NULL REFERENCES tasks (id),
    agent            TEXT    NOT NULL,
    role             TEXT    NOT NULL,
    workspace_key    TEXT    NOT NULL,
    agent_session_id TEXT,
    verified         BOOLEAN NOT NULL,
    step_id          TEXT,
    ended            TEXT,
    started_at       BIGINT  NOT NULL
);

-- Events are append-only: no statement may change or remove one.
CREATE FUNCTION gaffer_events_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'journal events are append-only';
END
$$;
CREATE TRIGGER events_no_update_or_delete BEFORE UPDATE OR DELETE ON events
    FOR EACH ROW EXECUTE FUNCTION gaffer_events_append_only();
CREATE TRIGGER events_no_truncate BEFORE TRUNCATE ON events
    FOR EACH STATEMENT EXECUTE FUNCTION gaffer_events_append_only();
