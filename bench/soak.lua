-- soak.lua - ten million tasks in random trees of spawn / await / fail, checked exactly: every
-- root's value or failure against a host-side model, the number of tasks run and failed against
-- the model's, and every counter back to zero (no frame, future or queue entry leaked).
--   luajit bench/soak.lua [backend] [tasks] [seed]     (defaults: auto, 10000000, 1)
local mw = require "moonwarp"

local backend, target, seed = arg[1], tonumber(arg[2] or 1e7), tonumber(arg[3] or 1)
assert(target and target > 0 and seed, "usage: luajit bench/soak.lua [backend] [tasks] [seed]")

local SOURCE = [[
__device__ long long next_seed(long long s) { return s * 48271 % 2147483647; }

// a leaf (a value, or a failure) or 1..3 children, all spawned, then awaited in turn and summed
task long node(long long s, int depth) {
  local future kids[3];
  local int k, i;
  local long total;
  if (depth == 0 || s % 4 == 0) {
    if (s % 23 == 0) fail(5, "leaf failed");
    return s % 1000;
  }
  k = 1 + (int)(s % 3);
  for (i = 0; i < k; ++i) kids[i] = spawn(node, next_seed(s + i + 1), depth - 1);
  total = s % 1000;
  for (i = 0; i < k; ++i) {
    await(kids[i]);
    total += (long)value(kids[i]);
  }
  return total;
}
]]

local function next_seed(s) return (s * 48271) % 2147483647 end

-- value (nil when the node fails), tasks run, tasks failed. Every child is spawned before the
-- first await, so a failing child does not stop its siblings from running.
local function model(s, depth)
  if depth == 0 or s % 4 == 0 then
    if s % 23 == 0 then return nil, 1, 1 end
    return s % 1000, 1, 0
  end
  local total, tasks, failed, bad = s % 1000, 1, 0, false
  for i = 0, s % 3 do
    local v, n, f = model(next_seed(s + i + 1), depth - 1)
    tasks, failed = tasks + n, failed + f
    if v == nil then bad = true else total = total + v end
  end
  if bad then return nil, tasks, failed + 1 end
  return total, tasks, failed
end

local rt = assert(mw.runtime { backend = backend })
local prog = assert(rt:compile(SOURCE, "soak.cu"))
math.randomseed(seed)
-- the roots and what the model says of each, worked out before the clock starts
local plan, want_tasks, want_failed = {}, 0, 0
while want_tasks < target do
  for _ = 1, 256 do
    local s, depth = math.random(1, 2147483646), math.random(4, 14)
    local v, n, f = model(s, depth)
    plan[#plan + 1] = { s, depth, v }
    want_tasks, want_failed = want_tasks + n, want_failed + f
  end
end
local before = rt:stats()
local roots, bad_roots = 0, 0
local t0 = mw.now()
for first = 1, #plan, 256 do
  local batch = {}
  for r = first, first + 255 do
    local s, depth, v = plan[r][1], plan[r][2], plan[r][3]
    batch[#batch + 1] = { prog.node(s, depth), v, s, depth }
  end
  for _, b in ipairs(batch) do
    local fut, v, s, depth = b[1], b[2], b[3], b[4]
    local ok, got, err = pcall(fut.await, fut, 120)
    if not ok then got, err = nil, got end
    roots = roots + 1
    if v == nil then
      bad_roots = bad_roots + 1
      assert(got == nil and tostring(err):find("leaf failed", 1, true),
        ("seed %d: node(%d, %d) should fail, got %s %s"):format(seed, s, depth, tostring(got), tostring(err)))
    else
      assert(got == v, ("seed %d: node(%d, %d) = %s, want %d (%s)"):format(seed, s, depth,
        tostring(got), v, tostring(err)))
    end
  end
end
-- children of a failing parent run on after their root has failed: the time runs until all
-- have ended, and every worker's count of queued records (a snapshot it writes when it goes
-- idle) has caught up
local awaited = mw.now() - t0
local after
repeat
  after = rt:stats()
  local ended = after.completed + after.failed + after.cancelled
until (after.spawned - before.spawned >= want_tasks and after.spawned == ended
  and after.frames_in_use == 0 and after.queued_local == 0) or mw.now() - t0 > awaited + 10
local took = mw.now() - t0
local spawned = after.spawned - before.spawned
local completed = after.completed - before.completed
local failed = after.failed - before.failed
print(("soak on %s, seed %d: %d roots (%d failing), %d tasks in %.2f s (%.2f M tasks/s)"):format(
  rt.backend, seed, roots, bad_roots, spawned, took, spawned / took / 1e6))
print(("  spawned %d (model %d), completed %d, failed %d (model %d)"):format(spawned, want_tasks,
  completed, failed, want_failed))
print(("  left over: in_flight %d, frames_in_use %d, queued inbox/global/local %d/%d/%d"):format(
  after.in_flight, after.frames_in_use, after.queued_inbox, after.queued_global, after.queued_local))
local ok = spawned == want_tasks and failed == want_failed and completed + failed == spawned
  and after.in_flight == 0 and after.frames_in_use == 0 and after.queued_inbox == 0
  and after.queued_global == 0 and after.queued_local == 0
rt:close()
print(ok and "soak: all counts exact, nothing leaked" or "soak: FAILED")
os.exit(ok and 0 or 1)
