-- A task's own retry policy (TaskSpec.retry_policy): NULL means the server's defaults.
-- JSON object: {"base_s": float, "cap_s": float, "errors": ["TypeName", ...]}; base_s and
-- cap_s are present together (resolved against the server's defaults at submission),
-- errors lists the error types that dead-letter at once.
ALTER TABLE tasks ADD COLUMN retry_policy JSONB;
