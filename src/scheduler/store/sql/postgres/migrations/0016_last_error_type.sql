-- 0016: a failed attempt's error type and traceback as the worker sent them
-- (Failure.error_type, Failure.traceback; issue 36): the dashboard's task page shows
-- them on top. NULL: none sent, or the last error was not a worker's (a lease expiry,
-- an upstream failure).
ALTER TABLE tasks ADD COLUMN last_error_type TEXT;
ALTER TABLE tasks ADD COLUMN last_traceback TEXT;
