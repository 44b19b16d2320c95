-- 0016: tenant names are unique (issue 40): `tickwheel tenants create acme` twice made two
-- tenants named acme, and every later command had to tell them apart by id. Of existing
-- tenants that share a name the oldest keeps it; each other one is renamed
-- NAME-<the first 8 hex digits of its id> (still at most 128 characters), so the index
-- can be built on any database. The stores answer a second name with AlreadyExists
-- (gRPC ALREADY_EXISTS, "tenant named 'acme' already exists").
UPDATE tenants t SET name = left(t.name, 119) || '-' || left(t.id::text, 8)
FROM (
    SELECT id, row_number() OVER (PARTITION BY name ORDER BY created_at NULLS LAST, id) AS n
    FROM tenants
) d
WHERE d.id = t.id AND d.n > 1;
CREATE UNIQUE INDEX tenants_name_key ON tenants (name);
