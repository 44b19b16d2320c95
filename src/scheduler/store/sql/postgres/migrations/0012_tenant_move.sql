-- 0012: moving a tenant's home (issue 16, `tickwheel tenants move`). One row per tenant
-- that is moving or has moved, in each of the two regions' databases:
--   role 'source', phase 'frozen': this region is its home and is handing it over; its
--     nodes neither dispatch its tasks nor answer its calls (UNAVAILABLE: retry);
--   role 'source', phase 'done': it has left (its live rows are gone, home_region names
--     the new home): calls are forwarded there;
--   role 'target', phase 'frozen': its rows are arriving here and are not served yet;
--   role 'target', phase 'done': it lives here (the same as no row).
-- Nodes read the table every EngineConfig.move_poll_interval_s; `fingerprint` is the
-- copied state the flip checks, so a re-run of the command resumes.
CREATE TABLE tenant_moves (
    tenant_id UUID PRIMARY KEY,
    role VARCHAR(8) NOT NULL CHECK (role IN ('source', 'target')),
    phase VARCHAR(8) NOT NULL CHECK (phase IN ('frozen', 'done')),
    from_region VARCHAR(64) NOT NULL,
    to_region VARCHAR(64) NOT NULL,
    started_at TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT NOW(),
    updated_at TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT NOW()
);
ALTER TABLE tenant_moves ENABLE ROW LEVEL SECURITY;
ALTER TABLE tenant_moves FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_scope ON tenant_moves USING (tickwheel_scope_is(tenant_id));
