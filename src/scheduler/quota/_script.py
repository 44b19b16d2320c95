"""The one Lua script behind :class:`RedisQuota` (every operation is one atomic EVALSHA).

KEYS[1] = the nodes ZSET; then per tenant KEYS[2i] = its bucket, KEYS[2i+1] = its
in-flight hash. ARGV = op, node id, lease ms, caller now ms, bucket TTL ms, then four
numbers per tenant:

- ``reserve``: wanted, rate_limit_rps, max_concurrent, own -> units granted; ``own`` is
  the node's own in-flight as it knows it, written to its field first when its lease had
  lapsed (so the cap counts it before granting)
- ``refund``: units, 0, 0, 0 -> 0
- ``finished``: units, 0, 0, 0 -> 0
- ``sync``: this node's true in-flight, 0, 0, 0 -> 0 (overwrites the node's field)
- ``beat``: no tenants (renews the lease only)

The reply is ``{lapsed, per-tenant results...}``; ``lapsed`` is 1 when this node had no
live lease before the call (first contact, or its lease ran out and other nodes may
have dropped its counts), so the caller re-syncs its in-flight.

Node leases use Redis ``TIME`` (one clock for liveness); the buckets use the caller's
clock (see :mod:`scheduler.quota._redis` for why).
"""

from __future__ import annotations

SCRIPT = """
local op = ARGV[1]
local node = ARGV[2]
local lease_ms = tonumber(ARGV[3])
local now_ms = tonumber(ARGV[4])
local bucket_ttl_ms = tonumber(ARGV[5])
local nodes = KEYS[1]

local t = redis.call('TIME')
local srv_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', nodes, '-inf', srv_ms)
local lapsed = redis.call('ZADD', nodes, srv_ms + lease_ms, node)

local function live_in_flight(key)
  local total = 0
  local flat = redis.call('HGETALL', key)
  for i = 1, #flat, 2 do
    if redis.call('ZSCORE', nodes, flat[i]) then
      total = total + tonumber(flat[i + 1])
    else
      redis.call('HDEL', key, flat[i])
    end
  end
  return total
end

local function set_own(key, n)
  if n > 0 then
    redis.call('HSET', key, node, n)
  else
    redis.call('HDEL', key, node)
  end
end

local function lower(key, n)
  local left = (tonumber(redis.call('HGET', key, node)) or 0) - n
  if left > 0 then
    redis.call('HSET', key, node, left)
  else
    redis.call('HDEL', key, node)
  end
end

local function refill(key, rate)
  local cap = rate * 1000
  local st = redis.call('HMGET', key, 'tokens', 'ts')
  if not st[1] then
    return cap, now_ms
  end
  local tokens = tonumber(st[1])
  local ts = tonumber(st[2])
  if now_ms > ts then
    tokens = tokens + (now_ms - ts) * rate
    ts = now_ms
  end
  if tokens > cap then
    tokens = cap
  end
  return tokens, ts
end

local function store(key, tokens, ts, rate)
  redis.call('HSET', key, 'tokens', tokens, 'ts', ts, 'rate', rate)
  redis.call('PEXPIRE', key, bucket_ttl_ms)
end

local out = {lapsed}
local n = (#KEYS - 1) / 2
for i = 1, n do
  local bkey = KEYS[2 * i]
  local fkey = KEYS[2 * i + 1]
  local a = tonumber(ARGV[2 + 4 * i])
  local b = tonumber(ARGV[3 + 4 * i])
  local c = tonumber(ARGV[4 + 4 * i])
  local d = tonumber(ARGV[5 + 4 * i])
  local res = 0
  if op == 'reserve' then
    if lapsed == 1 then
      set_own(fkey, d)
    end
    local tokens, ts = refill(bkey, b)
    local room = c - live_in_flight(fkey)
    local grant = math.min(a, math.floor(tokens / 1000), room)
    if grant < 0 then
      grant = 0
    end
    store(bkey, tokens - grant * 1000, ts, b)
    if grant > 0 then
      redis.call('HINCRBY', fkey, node, grant)
    end
    res = grant
  elseif op == 'refund' then
    local rate = tonumber(redis.call('HGET', bkey, 'rate'))
    if rate then
      local tokens, ts = refill(bkey, rate)
      store(bkey, math.min(rate * 1000, tokens + a * 1000), ts, rate)
    end
    lower(fkey, a)
  elseif op == 'finished' then
    lower(fkey, a)
  elseif op == 'sync' then
    set_own(fkey, a)
  end
  out[#out + 1] = res
end
return out
"""
