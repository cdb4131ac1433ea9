-- A content-addressed cache (the project index's per-file facts). Not part of
-- the journal: losing it only costs re-indexing.
CREATE TABLE blobs (
    key   TEXT PRIMARY KEY,
    value BYTEA NOT NULL
);
