"""The Lua scripts of the time index. KEYS = due ZSET, meta HASH, seeded marker."""

from __future__ import annotations

SEEDED = "1"
"""Marker value of a complete shard index; a rebuild holds ``build:<token>`` meanwhile."""

# ARGV: marker value the shard must have, marker value to set afterwards ('' keeps it),
# then (member, score_ms, meta) triples. Returns the number of members written, or -1
# when the marker differs (flushed, evicted, never seeded, or another rebuild began).
ADD = """
if redis.call('GET', KEYS[3]) ~= ARGV[1] then
  return -1
end
local n = 0
for i = 3, #ARGV, 3 do
  redis.call('ZADD', KEYS[1], ARGV[i + 1], ARGV[i])
  redis.call('HSET', KEYS[2], ARGV[i], ARGV[i + 2])
  n = n + 1
end
if ARGV[2] ~= '' then
  redis.call('SET', KEYS[3], ARGV[2])
end
return n
"""

# ARGV: now_ms, limit, seeded marker value. Returns {-1} when the shard is not seeded,
# else a flat list {member1, meta1, member2, meta2, ...} of the due members it removed,
# earliest first (ties by member).
POP_DUE = """
if redis.call('GET', KEYS[3]) ~= ARGV[3] then
  return {-1}
end
local members = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, ARGV[2])
if #members == 0 then
  return {}
end
local metas = redis.call('HMGET', KEYS[2], unpack(members))
redis.call('ZREM', KEYS[1], unpack(members))
redis.call('HDEL', KEYS[2], unpack(members))
local out = {}
for i = 1, #members do
  out[2 * i - 1] = members[i]
  out[2 * i] = metas[i] or ''
end
return out
"""

# ARGV: members. Returns how many were removed.
REMOVE = """
local n = redis.call('ZREM', KEYS[1], unpack(ARGV))
redis.call('HDEL', KEYS[2], unpack(ARGV))
return n
"""
