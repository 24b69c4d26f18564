-- property_spec.lua - random trees of spawn / await / fail checked against a host-side model,
-- on every backend. Each tree grows from a seed; a failure names the seed, and
-- MW_PROPERTY_SEED=n reruns one. Invariants: every future completes exactly once with the
-- model's value or failure, and the runtime's counters balance when all is done.
local mw = require "moonwarp"
local support = require "spec.support"

local SOURCE = [[
__device__ long long next_seed(long long s) { return s * 48271 % 2147483647; }

// a node: a leaf (value or failure) or 1..3 children awaited in turn, summed
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

-- the model: value, or nil when the tree fails; and the number of tasks it runs
local function model(s, depth)
  if depth == 0 or s % 4 == 0 then
    if s % 23 == 0 then return nil, 1 end
    return s % 1000, 1
  end
  local k = 1 + s % 3
  local total, tasks, failed = s % 1000, 1, false
  for i = 0, k - 1 do
    local v, n = model(next_seed(s + i + 1), depth - 1)
    tasks = tasks + n
    if v == nil then
      failed = true
      break -- the parent stops at the first failed child
    end
    total = total + v
  end
  if failed then return nil, tasks end
  return total, tasks
end

local seeds = { 1, 2, 3 }
if os.getenv("MW_PROPERTY_SEED") then seeds = { tonumber(os.getenv("MW_PROPERTY_SEED")) } end

support.each_backend(function(backend)
  local rt, prog
  setup(function()
    rt = support.runtime(backend)
    prog = support.compile(rt, SOURCE, "tree.cu")
  end)
  teardown(function() rt:close() end)

  for _, seed in ipairs(seeds) do
    it("random trees from seed " .. seed .. " match the model", function()
      math.randomseed(seed)
      local before = rt:stats()
      local roots, futures, want = backend == "cuda" and 300 or 150, {}, {}
      local nodes = 0
      for r = 1, roots do
        local s = math.random(1, 2147483646)
        local depth = math.random(0, 6)
        futures[r] = { prog.node(s, depth), s, depth }
        local v, n = model(s, depth)
        want[r] = v
        nodes = nodes + n
      end
      local failures = 0
      for r = 1, roots do
        local f, s, depth = unpack(futures[r])
        local ok, got = pcall(f.await, f, 60)
        if want[r] == nil then
          failures = failures + 1
          assert(not ok and tostring(got):find("leaf failed", 1, true),
            ("seed %d root %d (s=%d, depth=%d): expected a failure, got %s"):format(seed, r, s, depth,
              tostring(got)))
        else
          assert(ok and got == want[r], ("seed %d root %d (s=%d, depth=%d): got %s, want %d"):format(
            seed, r, s, depth, tostring(got), want[r]))
        end
      end
      -- children a failed parent did not await still run (nothing cancels them yet): the
      -- counters balance once they have finished
      local after, spawned, ended
      local t0 = mw.now()
      repeat
        after = rt:stats()
        spawned = after.spawned - before.spawned
        ended = (after.completed - before.completed) + (after.failed - before.failed)
      until spawned == ended or mw.now() - t0 > 30
      assert.equals(spawned, ended)
      assert.equals(0, after.in_flight)
      assert.is_true(spawned >= nodes, ("%d tasks ran, the model needs at least %d"):format(spawned, nodes))
      print(("  [%s seed %d: %d roots, %d failed as the model says, %d tasks]"):format(
        backend, seed, roots, failures, spawned))
    end)
  end
end)
