-- 0021: the idempotency keys with a window in time, by tenant (issue 43). A tenant's
-- home move copies the finished tasks whose key's TTL has not run out
-- (store/postgres/move_flow.py), on every copy round, one inside the tenant's pause:
-- without this it read every key row the tenant ever had (one per task). Partial: only
-- the keys submitted with idempotency_ttl_s.
CREATE INDEX idx_task_keys_ttl ON task_keys (tenant_id, expires_at)
    WHERE expires_at IS NOT NULL;
