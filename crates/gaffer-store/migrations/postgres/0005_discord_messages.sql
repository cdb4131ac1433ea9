-- Discord ids of what the Discord adapter posted for gaffer records: a task's
-- thread, its status message, an approval's message. Not part of the journal
-- (no event depends on it), but kept beside it so a restarted adapter
-- re-attaches to its threads and messages instead of posting new ones.
-- `rendered` is a digest of what the message shows now, so an unchanged
-- message is not edited again.
CREATE TABLE discord_messages (
    kind       TEXT NOT NULL,
    gaffer_id  TEXT NOT NULL,
    channel_id TEXT NOT NULL,
    message_id TEXT NOT NULL,
    rendered   TEXT NOT NULL DEFAULT '',
    updated_at BIGINT NOT NULL,
    PRIMARY KEY (kind, gaffer_id)
);
