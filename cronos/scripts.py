"""Lua scripts, as named constants. Each is registered once per client (`register`)."""

from __future__ import annotations

from typing import Any

# KEYS[1] lock key; ARGV[1] owner token; ARGV[2] ttl ms. 1 if still ours and extended.
RENEW_IF_OWNER = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
"""

# KEYS[1] lock key; ARGV[1] owner token. 1 if it was ours and is now gone.
RELEASE_IF_OWNER = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
"""

# KEYS: lock keys; ARGV[1] owner; ARGV[2] ttl ms. SET NX PX each; answers one string,
# "1" (taken) or "0" (denied) per key in order: one command and one reply for a whole
# batch, where a pipeline costs a command and a reply per key.
# A key already held by the same owner counts as taken (and is extended): a node restarted
# under the same id (a container keeps its hostname, runs as PID 1) must not be locked out
# of the ticks its previous incarnation locked and never claimed. The PostgreSQL claim,
# not this lock, is what keeps a tick from running twice.
ACQUIRE_MANY_NX = """
local out = {}
for i, key in ipairs(KEYS) do
  if redis.call('SET', key, ARGV[1], 'NX', 'PX', ARGV[2]) then
    out[i] = '1'
  elseif redis.call('GET', key) == ARGV[1] then
    redis.call('PEXPIRE', key, ARGV[2])
    out[i] = '1'
  else
    out[i] = '0'
  end
end
return table.concat(out)
"""

# KEYS: lock keys; ARGV[1] owner token. Deletes those we own; returns how many.
RELEASE_MANY_IF_OWNER = """
local n = 0
for i, key in ipairs(KEYS) do
  if redis.call('GET', key) == ARGV[1] then
    n = n + redis.call('DEL', key)
  end
end
return n
"""

# KEYS: lock keys; ARGV[1] owner; ARGV[2] ttl ms. Extends those we own; returns how many.
RENEW_MANY_IF_OWNER = """
local n = 0
for i, key in ipairs(KEYS) do
  if redis.call('GET', key) == ARGV[1] then
    n = n + redis.call('PEXPIRE', key, ARGV[2])
  end
end
return n
"""


# KEYS[1] stream; ARGV: field name, then one encoded token per entry. Returns the count.
APPEND_BATCH = """
local field = ARGV[1]
for i = 2, #ARGV do
  redis.call('XADD', KEYS[1], '*', field, ARGV[i])
end
return #ARGV - 1
"""

# KEYS[1] a queue's stream, KEYS[2] the set of queue names; ARGV[1] the queue, ARGV[2] the group.
# Deletes the stream and unlists the queue, only while the stream holds no entry (none unread) and
# its group none pending: a token pushed meanwhile keeps it. 1 if dropped.
DROP_QUEUE_IF_EMPTY = """
if redis.call('EXISTS', KEYS[1]) == 1 then
  if redis.call('XLEN', KEYS[1]) > 0 then
    return 0
  end
  local ok, pending = pcall(redis.call, 'XPENDING', KEYS[1], ARGV[2])
  if ok and tonumber(pending[1]) > 0 then
    return 0
  end
  redis.call('DEL', KEYS[1])
end
redis.call('SREM', KEYS[2], ARGV[1])
return 1
"""

# Deletes the stream and unlists the queue, whatever it holds, once its newest entry is at least
# ARGV[2] ms old by Redis' clock (a queue named and pushed to since the caller looked keeps it).
# For a queue no job names and no executor reads: its entries would never be read. The number of
# entries dropped, or -1 if kept.
DROP_QUEUE_IF_STALE = """
local newest = redis.call('XREVRANGE', KEYS[1], '+', '-', 'COUNT', 1)[1]
if newest then
  local t = redis.call('TIME')
  local now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local at_ms = tonumber(string.match(newest[1], '^(%d+)'))
  if now_ms - at_ms < tonumber(ARGV[2]) then
    return -1
  end
end
local dropped = redis.call('XLEN', KEYS[1])
redis.call('DEL', KEYS[1])
redis.call('SREM', KEYS[2], ARGV[1])
return dropped
"""

# KEYS[1] a queue's stream; ARGV[1] its group, ARGV[2] a consumer, ARGV[3] retire it only if idle
# at least this many ms (0: whatever its idle), ARGV[4] hand back its entries pending at least this
# many ms, ARGV[5] at most this many of them. Each entry handed back is re-added to the stream as a
# new entry (read by the group's next reader) and acknowledged; then, if nothing is pending for the
# consumer any more, XGROUP DELCONSUMER (which would destroy pending entries: never while any is).
# Returns {handed back, outcome}: removed | pending (entries left: kept) | active (idle below
# ARGV[3]: kept) | absent (no such consumer, group or stream).
RETIRE_CONSUMER = """
local ok, consumers = pcall(redis.call, 'XINFO', 'CONSUMERS', KEYS[1], ARGV[1])
if not ok then
  return {0, 'absent'}
end
local idle = nil
for _, row in ipairs(consumers) do
  local fields = {}
  for i = 1, #row, 2 do
    fields[row[i]] = row[i + 1]
  end
  if fields['name'] == ARGV[2] then
    idle = tonumber(fields['idle'])
  end
end
if idle == nil then
  return {0, 'absent'}
end
if idle < tonumber(ARGV[3]) then
  return {0, 'active'}
end
local handed = 0
local entries = redis.call('XPENDING', KEYS[1], ARGV[1], 'IDLE', ARGV[4], '-', '+', ARGV[5], ARGV[2])
for _, entry in ipairs(entries) do
  local found = redis.call('XRANGE', KEYS[1], entry[1], entry[1])
  if #found > 0 then
    redis.call('XADD', KEYS[1], '*', unpack(found[1][2]))
    handed = handed + 1
  end
  redis.call('XACK', KEYS[1], ARGV[1], entry[1])
end
if #redis.call('XPENDING', KEYS[1], ARGV[1], '-', '+', 1, ARGV[2]) > 0 then
  return {handed, 'pending'}
end
redis.call('XGROUP', 'DELCONSUMER', KEYS[1], ARGV[1], ARGV[2])
return {handed, 'removed'}
"""


class Scripts:
    """The scripts registered on one client; EVALSHA with automatic reload."""

    def __init__(self, client: Any) -> None:
        self.renew_if_owner = client.register_script(RENEW_IF_OWNER)
        self.release_if_owner = client.register_script(RELEASE_IF_OWNER)
        self.release_many_if_owner = client.register_script(RELEASE_MANY_IF_OWNER)
        self.renew_many_if_owner = client.register_script(RENEW_MANY_IF_OWNER)
        self.acquire_many_nx = client.register_script(ACQUIRE_MANY_NX)
        self.append_batch = client.register_script(APPEND_BATCH)
        self.drop_queue_if_empty = client.register_script(DROP_QUEUE_IF_EMPTY)
        self.drop_queue_if_stale = client.register_script(DROP_QUEUE_IF_STALE)
        self.retire_consumer = client.register_script(RETIRE_CONSUMER)
