-- tiered_spec.lua - build = "tiered": a load links the program's part (quick), then the one-unit
-- image is built in a thread and swapped in; tasks run right before, across and after the swap.
local mw = require "moonwarp"
local support = require "spec.support"

local SLOW = [[
task int slow(int ms) {
  unsigned long long t0 = __shfl_sync(0xffffffffu, (unsigned long long)MW_GLOBALTIMER(), 0);
  while (MW_GLOBALTIMER() - t0 < (unsigned long long)ms * 1000000ull) __nanosleep(100000);
  return ms;
}
]]

support.each_backend(function(backend)
  describe("build = tiered", function()
    -- $MOONWARP_BUILD overrides the option: another build there has nothing to swap in
    local forced = os.getenv("MOONWARP_BUILD")
    if forced and forced ~= "" and forced ~= "tiered" then
      pending("MOONWARP_BUILD=" .. forced .. " overrides build = tiered")
      return
    end
    -- a runtime per test, one at a time: cuda runs one executor per device in a process
    local rt
    before_each(function() rt = support.runtime(backend, { build = "tiered" }) end)
    after_each(function() rt:close() end)

    -- polls until the one-unit image of the programs loaded so far is in (n swaps in all)
    local function swapped(n)
      local t0 = mw.now()
      while rt:stats().tier_swaps < n do
        assert(mw.now() - t0 < 120, "no one-unit image swapped in within 120 s")
        mw.run(0.01)
      end
    end

    it("runs a program at once, and on the one-unit image once it is in, with no task lost", function()
      local fib = support.compile(rt, support.FIB .. SLOW, "fib.cu")
      local launches = rt:stats().launches -- the swap comes at a later look at the executor
      local long = fib.slow(200) -- runs across the swap, or before it
      assert.equals(55, fib.fib(10):await(30)) -- on the parts image, or the new one if ready
      swapped(1)
      assert.is_true(rt:stats().launches > launches)
      assert.equals(200, long:await(30))
      assert.equals(6765, fib.fib(20):await(30))
      local st = rt:stats()
      assert.equals(st.spawned, st.completed)
    end)

    it("drops a build that a later load made old, and swaps in the newest", function()
      local a = support.compile(rt, "task int a(int x) { return x + 1; }\n", "a.cu")
      local b = support.compile(rt, "task int b(int x) { return x + 2; }\n", "b.cu")
      assert.equals(2, a.a(1):await(30))
      assert.equals(3, b.b(1):await(30))
      swapped(1)
      mw.run(0.2)
      assert.equals(1, rt:stats().tier_swaps) -- a's own build never came in
      assert.equals(11, a.a(10):await(30))
      assert.equals(12, b.b(10):await(30))
    end)
  end)
end)
