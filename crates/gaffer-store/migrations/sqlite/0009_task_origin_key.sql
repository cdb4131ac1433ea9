-- A task created once per origin key (`TaskOptions::key`: a schedule's slot, a
-- forge issue, a client's Idempotency-Key): the key is unique, so a second
-- creation for it fails in the append's transaction and writes nothing. Derived
-- from the `task_created` event like every projection column; tasks without a key
-- keep NULL, which a unique index does not compare.
ALTER TABLE tasks ADD COLUMN origin_key TEXT;
CREATE UNIQUE INDEX tasks_by_origin_key ON tasks (origin_key);
