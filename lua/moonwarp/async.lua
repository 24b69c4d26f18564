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
--                        (luv, cqueues, an engine's frame) calls it once per tick, or when
--                        rt:fd() is readable (it drains the fd of every runtime whose fd was
--                        asked for); completions are only seen when someone polls.
-- mw.run and h:await() outside a coroutine wait like f:await(): they nap between passes, for an
-- sixteenth of the time nothing completed (50 us to 1 ms), and Ctrl-C raises "interrupted" there.
-- Outside mw.async, f:await() blocks; inside, it takes the same arguments and raises the same
-- errors, at the caller.
--
-- Nothing is lost: a coroutine whose future's runtime broke or closed is resumed, and its
-- await raises there; the other coroutines go on waiting. A coroutine that ends with an error
-- hands it to whoever awaits its handle; if nobody has, the next mw.run or mw.poll raises it,
-- with the coroutine's traceback, after finishing its pass (call it again to go on).
local M = {}

local waiting = {}    -- list of { co = , f = , deadline = }
local unreported = {} -- handles whose coroutine failed and that nobody has awaited yet
local handles = setmetatable({}, { __mode = "k" }) -- coroutine -> its task handle
local future_mt       -- the metatable of moonwarp.future
local YIELD = {}      -- what an await yields, to tell it from a yield of the coroutine's own
local resumed = 0     -- resumptions so far: a wait naps short again after one
local state_of

local Task = {}
Task.__index = Task

function Task:done() return self.finished end

--- The message of a bad argument #n to fname, numbered the way Lua numbers a method's
-- arguments when the function at `level` was called as one.
local function bad_argument(level, n, fname, msg)
  local info = debug.getinfo(level + 1, "n")
  if info and info.namewhat == "method" then
    n = n - 1
    if n == 0 then return ("calling '%s' on bad self (%s)"):format(fname, msg) end
  end
  return ("bad argument #%d to '%s' (%s)"):format(n, fname, msg)
end

--- The results of the coroutine's function: runs the scheduler until it has finished when
-- called outside a coroutine; inside one, waits (yielding) for it. Raises its error.
function Task:await(timeout)
  if getmetatable(self) ~= Task then error("bad argument #1 to 'await' (moonwarp.async task expected)", 2) end
  if timeout ~= nil and not (type(timeout) == "number" and timeout >= 0) then
    error("bad argument #1 to 'await' (number of seconds >= 0 expected, got " .. type(timeout) .. ")", 2)
  end
  self.awaited = true -- its error, if any, is the caller's now
  local deadline = timeout and M.now() + timeout
  if handles[coroutine.running() or false] then
    while not self.finished do coroutine.yield(YIELD) end
  elseif not self.finished then
    local timed_out = M.interruptible(function()
      local idle_since, seen = M.now(), resumed
      while not self.finished do
        if M.poll() == 0 and not self.finished then return end
        local now = M.now()
        if deadline and now > deadline then return true end
        if resumed ~= seen then idle_since, seen = now, resumed end
        M.nap(now - idle_since, deadline and deadline - now)
      end
    end)
    if timed_out then return nil, "timed out", "ETIMEDOUT" end
  end
  if not self.finished then error("moonwarp.async: the task waits on nothing and never finished", 2) end
  if not self.ok then error(self.err, 0) end
  return unpack(self.results, 1, self.results.n)
end

function Task:__tostring()
  return ("moonwarp.async<%s>"):format(self.finished and (self.ok and "done" or "failed") or "waiting")
end

local function pack(...) return { n = select("#", ...), ... } end

--- Resumes co (with the values given); records its end, or what it now waits for.
local function step(co, ...)
  resumed = resumed + 1
  local h = handles[co]
  local res = pack(coroutine.resume(co, ...))
  if coroutine.status(co) == "dead" then
    h.finished = true
    -- the coroutine runs fn under xpcall: (true, true, results...) or (true, false, err)
    h.ok = res[1] and res[2]
    if h.ok then
      h.results = { n = res.n - 2, unpack(res, 3, res.n) }
    else
      if res[1] then h.err = res[3] else h.err, h.traceback = res[2], debug.traceback(co) end
      if not h.awaited then unreported[#unreported + 1] = h end
    end
    return
  end
  -- an await yields (YIELD, future or nil, deadline); any other yield waits one pass
  local f, deadline = nil, nil
  if res[2] == YIELD then f, deadline = res[3], res[4] end
  waiting[#waiting + 1] = { co = co, f = f, deadline = deadline }
end

--- mw.async(fn, ...): starts fn(...) as a coroutine now; returns its task handle
-- (h:done(), h:await([timeout])).
function M.async(fn, ...)
  if type(fn) ~= "function" then error("bad argument #1 to 'async' (function expected, got " .. type(fn) .. ")", 2) end
  local h = setmetatable({ finished = false }, Task)
  -- fn runs under xpcall inside the coroutine, so that its error keeps the stack it came from
  local function where(e)
    h.traceback = debug.traceback("", 2):sub(2)
    return e
  end
  local co = coroutine.create(function(...) return xpcall(fn, where, ...) end)
  handles[co] = h
  step(co, ...)
  return h
end

--- Whether the running coroutine is one of mw.async's.
function M.in_async()
  local co = coroutine.running()
  return co ~= nil and handles[co] ~= nil
end

--- Raises the oldest error of a coroutine that nobody awaited, with its traceback.
local function report()
  local h = table.remove(unreported, 1)
  h.awaited = true
  if type(h.err) ~= "string" then error(h.err, 0) end
  error(("%s\n(raised in a coroutine of mw.async that nothing awaited)\n%s"):format(h.err,
    h.traceback), 0)
end

--- Whether the coroutine waiting in w can go on: its future completed, or failed to say (a
-- closed or faulted runtime: its await will raise), or its deadline passed, or it waits on
-- nothing.
local function ready(w, now)
  if w.f == nil or (w.deadline and now >= w.deadline) then return true end
  local ok, done = pcall(w.f.done, w.f)
  return not ok or done
end

--- One pass over the waiting coroutines; returns how many still wait. Raises the error of a
-- coroutine nobody awaited, after the pass.
function M.poll()
  M.poll_fds()
  local now = M.now()
  local list = waiting
  waiting = {}
  for i = 1, #list do
    local w = list[i]
    if ready(w, now) then step(w.co) else waiting[#waiting + 1] = w end
  end
  if #unreported > 0 then report() end
  return #waiting
end

--- Runs until no coroutine waits, or timeout_s passes; returns how many still wait. Raises
-- the error of a coroutine nobody awaited (the others keep waiting: call it again).
function M.run(timeout)
  if timeout ~= nil and not (type(timeout) == "number" and timeout >= 0) then
    error("bad argument #1 to 'run' (number of seconds >= 0 expected, got " .. type(timeout) .. ")", 2)
  end
  local deadline = timeout and M.now() + timeout
  return M.interruptible(function()
    local left = M.poll()
    local idle_since, seen = M.now(), resumed
    while left > 0 do
      local now = M.now()
      if deadline and now >= deadline then break end
      if resumed ~= seen then idle_since, seen = now, resumed end
      M.nap(now - idle_since, deadline and deadline - now)
      left = M.poll()
    end
    return left
  end)
end

--- Whether future f has completed; a closed or broken runtime is raised at the caller of the
-- function that asks (what f:done() raises, without this file's position).
local here = debug.getinfo(1, "S").short_src
state_of = function(f)
  local ok, done = pcall(f.done, f)
  if ok then return done end
  if type(done) == "string" then
    local prefix = here .. ":"
    if done:sub(1, #prefix) == prefix then done = done:gsub("^[^:]*:%d+: ", "", 1) end
  end
  error(done, 3)
end

--- Installs the future's await: inside mw.async coroutines it yields until the future is
-- complete; everywhere it checks its arguments first and raises at its caller. future_meta is
-- the future's metatable; `await` in its __index is the blocking method.
-- core: the binding's waits (core._nap, core._interruptible, core._poll_fds).
function M.install(future_meta, now, core)
  M.now = now
  M.nap = core._nap
  M.interruptible = core._interruptible
  M.poll_fds = core._poll_fds
  future_mt = future_meta
  local methods = future_meta.__index
  local blocking = methods.await
  methods.await = function(f, timeout)
    -- the checks of the blocking await, made here so that they hold inside coroutines too
    if debug.getmetatable(f) ~= future_mt then
      error(bad_argument(1, 1, "await", "moonwarp.future expected, got " .. type(f)), 2)
    end
    if timeout ~= nil and type(timeout) ~= "number" then
      error(bad_argument(1, 2, "await", "number expected, got " .. type(timeout)), 2)
    end
    if timeout ~= timeout then error(bad_argument(1, 2, "await", "timeout is NaN"), 2) end
    local done = state_of(f)
    if not done and M.in_async() then
      -- a negative timeout, like none, waits for ever
      coroutine.yield(YIELD, f, timeout and timeout >= 0 and M.now() + timeout or nil)
      if not state_of(f) then return nil, "timed out", "ETIMEDOUT" end
    end
    return blocking(f, timeout)
  end
end

return M
