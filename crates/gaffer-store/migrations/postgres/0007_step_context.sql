-- The repository context a step's agent was given (`step_context_packed`): a JSON
-- object {budget, used, files: [{path, mode, tokens}]}. A projection of the journal
-- like every other column here.
ALTER TABLE steps ADD COLUMN context TEXT;
