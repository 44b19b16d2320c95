-- Issue 15: API keys with scopes, expiry, revocation time, last use and rotation.
-- `revoked` keeps its meaning (the key is revoked); `revoked_at` says when (NULL for
-- keys revoked before this migration). Keys made before it get the default scopes
-- (submit, read, work: everything but admin), so they keep working as before.

ALTER TABLE api_keys ADD COLUMN scopes TEXT[] NOT NULL DEFAULT ARRAY['submit', 'read', 'work']::TEXT[];
ALTER TABLE api_keys ADD COLUMN expires_at TIMESTAMP WITH TIME ZONE;
ALTER TABLE api_keys ADD COLUMN revoked_at TIMESTAMP WITH TIME ZONE;
ALTER TABLE api_keys ADD COLUMN last_used_at TIMESTAMP WITH TIME ZONE;
ALTER TABLE api_keys ADD COLUMN rotated_from UUID;
CREATE INDEX idx_api_keys_tenant ON api_keys (tenant_id, created_at);
