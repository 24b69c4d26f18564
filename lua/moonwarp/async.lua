--- moonwarp.async: device futures awaited from Lua coroutines.
--
-- mw.async(fn, ...) runs fn(...) as a coroutine in which f:await() yields instead of blocking
-- when f is not complete yet. The scheduler resumes a coroutine once the future it waits on
-- completes (or its timeout runs out), so hundreds of coroutines wait on their own futures at
-- once and a slow one holds nobody back. Drive it with:
--   mw.run([timeout_s])  resumes coroutines as their futures complete, until none is left
--                        waiting (or the timeout runs out; then returns the number waiting)
--   mw.poll()            one pass, never blocks: resumes the coroutines whose futures are
--                        complete and returns the number still waiting. An outside event loop
--                        (luv, cqueues, an engine's frame) calls it once per tick; completions
--                        are only seen when someone polls.
-- Outside mw.async, f:await() blocks as before.
local M = {}

local waiting = {} -- list of { co = , f = , deadline = }
local handles = setmetatable({}, { __mode = "k" }) -- coroutine -> its task handle

local Task = {}
Task.__index = Task

function Task:done() return self.finished end

--- The results of the coroutine's function: runs the scheduler until it has finished when
-- called outside a coroutine; inside one, waits (yielding) for it. Raises its error.
function Task:await(timeout)
  if timeout ~= nil and not (type(timeout) == "number" and timeout >= 0) then
    error("bad argument #1 to 'await' (number of seconds >= 0 expected, got " .. type(timeout) .. ")", 2)
  end
  local deadline = timeout and M.now() + timeout
  while not self.finished do
    if handles[coroutine.running() or false] then
      coroutine.yield(nil)
    else
      if M.poll() == 0 and not self.finished then break end
      if deadline and M.now() > deadline then return nil, "timed out", "ETIMEDOUT" end
      M.idle()
    end
  end
  if not self.finished then error("moonwarp.async: the task waits on nothing and never finished", 2) end
  if not self.ok then error(self.err, 2) end
  return unpack(self.results, 1, self.results.n)
end

function Task:__tostring()
  return ("moonwarp.async<%s>"):format(self.finished and (self.ok and "done" or "failed") or "waiting")
end

local function pack(...) return { n = select("#", ...), ... } end

local function step(co, ...)
  local h = handles[co]
  local res = pack(coroutine.resume(co, ...))
  if coroutine.status(co) == "dead" then
    h.finished = true
    h.ok = res[1]
    if res[1] then
      h.results = { n = res.n - 1, unpack(res, 2, res.n) }
    else
      h.err = res[2]
    end
    return
  end
  local f, timeout = res[2], res[3]
  waiting[#waiting + 1] = { co = co, f = f, deadline = timeout and M.now() + timeout }
end

--- mw.async(fn, ...): starts fn(...) as a coroutine now; returns its task handle
-- (h:done(), h:await([timeout])).
function M.async(fn, ...)
  assert(type(fn) == "function", "bad argument #1 to 'async' (function expected, got " .. type(fn) .. ")")
  local co = coroutine.create(fn)
  local h = setmetatable({ finished = false }, Task)
  handles[co] = h
  step(co, ...)
  return h
end

--- Whether the running coroutine is one of mw.async's.
function M.in_async()
  local co = coroutine.running()
  return co ~= nil and handles[co] ~= nil
end

--- One pass over the waiting coroutines; returns how many still wait.
function M.poll()
  local now = M.now()
  local list = waiting
  waiting = {}
  for i = 1, #list do
    local w = list[i]
    if w.f == nil or w.f:done() or (w.deadline and now >= w.deadline) then
      step(w.co)
    else
      waiting[#waiting + 1] = w
    end
  end
  return #waiting
end

--- Runs until no coroutine waits, or timeout_s passes; returns how many still wait.
function M.run(timeout)
  if timeout ~= nil and not (type(timeout) == "number" and timeout >= 0) then
    error("bad argument #1 to 'run' (number of seconds >= 0 expected, got " .. type(timeout) .. ")", 2)
  end
  local deadline = timeout and M.now() + timeout
  local left = M.poll()
  while left > 0 do
    if deadline and M.now() >= deadline then break end
    M.idle()
    left = M.poll()
  end
  return left
end

--- Installs the future's await: yields inside mw.async coroutines. `await` is the blocking
-- method of the future type.
function M.install(future_methods, now)
  M.now = now
  local blocking = future_methods.await
  future_methods.await = function(f, timeout)
    if not f:done() and M.in_async() then
      coroutine.yield(f, timeout)
      if not f:done() then return nil, "timed out", "ETIMEDOUT" end
    end
    return blocking(f, timeout)
  end
end

-- A short pause between polls when nothing completed: LuaJIT's FFI sleeps 50 us, else spin.
do
  local ok, ffi = pcall(require, "ffi")
  if ok then
    pcall(ffi.cdef, "int usleep(unsigned int usec);")
    M.idle = function() ffi.C.usleep(50) end
  else
    M.idle = function() end
  end
end

return M
