-- profile_chain.lua - a chain of dependent device hops on a few workers and nothing else, for
-- a profiler to sample (ncu --replay-mode application, see bench/NOTES.md).
--   luajit bench/profile_chain.lua [backend] [hops] [workers]   (defaults: auto, 20000, 4)
local mw = require "moonwarp"
local backend, hops, workers = arg[1], tonumber(arg[2] or 20000), tonumber(arg[3] or 4)
local rt = assert(mw.runtime { backend = backend, workers = workers, frame_bytes = 512 })
local here = (arg and arg[0] or "bench/profile_chain.lua"):match("^(.*)/[^/]*$") or "."
local prog = assert(rt:compile(dofile(here .. "/tasks.lua"), "bench/tasks.lua"))
local t0 = mw.now()
assert(prog.chain(hops):await(300) == math.floor(hops / 2))
print(("%d hops in %.3f s: %.2f us per hop on %s, %d workers"):format(hops, mw.now() - t0,
  (mw.now() - t0) * 1e6 / hops, rt.backend, rt:stats().workers))
rt:close()
