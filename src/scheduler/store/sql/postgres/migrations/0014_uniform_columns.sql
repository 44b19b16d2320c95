-- 0014: a batch's column whose every value is the same travels as one value (issue 20).
-- The hot statements take a batch as arrays, one per column, read by unnest. Most
-- columns of a batch hold one value throughout (a submit's tenant, type, state, times,
-- pool; a dispatch round's worker, lease and mode), and asyncpg spends about 0.2 us a
-- value encoding each (an isinstance check against three ABCs and the value's codec):
-- 3.95 us a task for the 15 columns of a submit, 0.83 for its 4 that differ. The store
-- sends such a column as a one-element array (store.postgres._db.column), and the
-- statement spreads it back to the batch's length with this function.
CREATE FUNCTION tickwheel_fill(a anyarray, n integer) RETURNS anyarray
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN cardinality(a) = 1 AND n > 1 THEN array_fill(a[1], ARRAY[n]) ELSE a END
$$;
