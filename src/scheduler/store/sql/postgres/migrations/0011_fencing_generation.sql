-- 0011: the fencing generation (issue 16, disaster recovery). One row: the generation
-- g, raised by `tickwheel dr promote` on a promoted standby (old g + 1 + a random salt
-- in [0, 1024)), and when and by what it was raised. Every fencing token and shard
-- epoch issued is at least (g << 40) + 1 (mark_dispatched, claim_shards), so after a
-- promote every token and epoch is above every one the lost primary ever issued, and a
-- worker or node of the old primary is refused - without rewriting every row. g = 0
-- (a database never promoted) gives base 0: no change.
CREATE TABLE fencing_generation (
    singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    generation bigint NOT NULL DEFAULT 0 CHECK (generation >= 0 AND generation < 8388608),
    raised_at timestamptz,
    raised_by text
);
INSERT INTO fencing_generation (singleton, generation) VALUES (true, 0)
    ON CONFLICT (singleton) DO NOTHING;
