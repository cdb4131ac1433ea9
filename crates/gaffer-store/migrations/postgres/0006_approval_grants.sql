-- "Allow for this task": a tool approval approved with a per-task grant
-- (`approval_decided.for_task`). Later identical tool calls of the task are
-- approved by it. A projection of the journal like every other column here.
ALTER TABLE approvals ADD COLUMN for_task BOOLEAN NOT NULL DEFAULT FALSE;
