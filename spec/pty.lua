-- pty.lua - runs a command on a pseudo-terminal of its own (posix_spawn into a new session whose
-- controlling terminal is the pty) and drives it as a person at a keyboard would: send keys,
-- wait for text on the screen. For the REPL's spec.
local ffi = require "ffi"

ffi.cdef [[
  typedef struct { uint64_t opaque[64]; } mwpty_actions_t;
  typedef struct { uint64_t opaque[64]; } mwpty_attr_t;
  typedef struct { uint64_t bits[16]; } mwpty_sigset_t;
  struct mwpty_pollfd { int fd; short events; short revents; };
  struct mwpty_winsize { unsigned short ws_row, ws_col, ws_xpixel, ws_ypixel; };
  int mwpty_posix_openpt(int flags) __asm__("posix_openpt");
  int mwpty_grantpt(int fd) __asm__("grantpt");
  int mwpty_unlockpt(int fd) __asm__("unlockpt");
  char *mwpty_ptsname(int fd) __asm__("ptsname");
  int mwpty_ioctl(int fd, unsigned long request, ...) __asm__("ioctl");
  int mwpty_posix_spawn_file_actions_init(mwpty_actions_t *fa)
    __asm__("posix_spawn_file_actions_init");
  int mwpty_posix_spawn_file_actions_destroy(mwpty_actions_t *fa)
    __asm__("posix_spawn_file_actions_destroy");
  int mwpty_posix_spawn_file_actions_addopen(mwpty_actions_t *fa, int fd, const char *path, int oflag, unsigned mode)
    __asm__("posix_spawn_file_actions_addopen");
  int mwpty_posix_spawn_file_actions_adddup2(mwpty_actions_t *fa, int fd, int newfd)
    __asm__("posix_spawn_file_actions_adddup2");
  int mwpty_posix_spawn_file_actions_addclose(mwpty_actions_t *fa, int fd)
    __asm__("posix_spawn_file_actions_addclose");
  int mwpty_posix_spawnattr_init(mwpty_attr_t *a) __asm__("posix_spawnattr_init");
  int mwpty_posix_spawnattr_destroy(mwpty_attr_t *a) __asm__("posix_spawnattr_destroy");
  int mwpty_posix_spawnattr_setflags(mwpty_attr_t *a, short flags)
    __asm__("posix_spawnattr_setflags");
  int mwpty_posix_spawnattr_setsigdefault(mwpty_attr_t *a, const mwpty_sigset_t *s)
    __asm__("posix_spawnattr_setsigdefault");
  int mwpty_posix_spawnattr_setsigmask(mwpty_attr_t *a, const mwpty_sigset_t *s)
    __asm__("posix_spawnattr_setsigmask");
  int mwpty_sigemptyset(mwpty_sigset_t *s) __asm__("sigemptyset");
  int mwpty_sigfillset(mwpty_sigset_t *s) __asm__("sigfillset");
  int mwpty_posix_spawnp(int *pid, const char *file, const mwpty_actions_t *fa,
                         const mwpty_attr_t *a, char *const argv[], char *const envp[])
    __asm__("posix_spawnp");
  int mwpty_poll(struct mwpty_pollfd *fds, unsigned long nfds, int timeout) __asm__("poll");
  long mwpty_read(int fd, void *buf, size_t n) __asm__("read");
  long mwpty_write(int fd, const void *buf, size_t n) __asm__("write");
  int mwpty_close(int fd) __asm__("close");
  int mwpty_kill(int pid, int sig) __asm__("kill");
  int mwpty_waitpid(int pid, int *status, int options) __asm__("waitpid");
]]
pcall(ffi.cdef, "extern char **environ;")

local C = ffi.C
local O_RDWR, O_NOCTTY = 2, 0x100
local TIOCSWINSZ = 0x5414
local POSIX_SPAWN_SETSIGDEF, POSIX_SPAWN_SETSIGMASK, POSIX_SPAWN_SETSID = 0x04, 0x08, 0x80
local WNOHANG, SIGKILL = 1, 9

local Pty = {}
Pty.__index = Pty

local function now()
  local mw = require "moonwarp"
  return mw.now()
end

--- Starts argv (a list; argv[1] looked up on PATH) with env (a list of "NAME=value" set on top
-- of this process's environment) on a new 40x120 pty.
local function spawn(argv, env)
  local master = C.mwpty_posix_openpt(O_RDWR + O_NOCTTY)
  assert(master >= 0, "posix_openpt")
  assert(C.mwpty_grantpt(master) == 0 and C.mwpty_unlockpt(master) == 0, "grantpt/unlockpt")
  local slave = ffi.string(C.mwpty_ptsname(master))
  local ws = ffi.new("struct mwpty_winsize", 40, 120, 0, 0)
  C.mwpty_ioctl(master, TIOCSWINSZ, ws)

  local full = { "env" }
  for _, e in ipairs(env or {}) do full[#full + 1] = e end
  for _, a in ipairs(argv) do full[#full + 1] = a end
  local cargv = ffi.new("char *[?]", #full + 1)
  local keep = {}
  for i, a in ipairs(full) do
    keep[i] = ffi.new("char[?]", #a + 1, a)
    cargv[i - 1] = keep[i]
  end
  cargv[#full] = nil

  local fa, at = ffi.new("mwpty_actions_t"), ffi.new("mwpty_attr_t")
  C.mwpty_posix_spawn_file_actions_init(fa)
  -- after setsid, opening the pty's slave makes it the controlling terminal
  C.mwpty_posix_spawn_file_actions_addopen(fa, 0, slave, O_RDWR, 0)
  C.mwpty_posix_spawn_file_actions_adddup2(fa, 0, 1)
  C.mwpty_posix_spawn_file_actions_adddup2(fa, 0, 2)
  C.mwpty_posix_spawn_file_actions_addclose(fa, master)
  C.mwpty_posix_spawnattr_init(at)
  local all, none = ffi.new("mwpty_sigset_t"), ffi.new("mwpty_sigset_t")
  C.mwpty_sigfillset(all)
  C.mwpty_sigemptyset(none)
  C.mwpty_posix_spawnattr_setsigdefault(at, all) -- nothing ignored, as from a login shell
  C.mwpty_posix_spawnattr_setsigmask(at, none)
  C.mwpty_posix_spawnattr_setflags(at, POSIX_SPAWN_SETSID + POSIX_SPAWN_SETSIGDEF
    + POSIX_SPAWN_SETSIGMASK)
  local pid = ffi.new("int[1]")
  local rc = C.mwpty_posix_spawnp(pid, "env", fa, at, cargv, C.environ)
  C.mwpty_posix_spawn_file_actions_destroy(fa)
  C.mwpty_posix_spawnattr_destroy(at)
  assert(rc == 0, "posix_spawnp failed: " .. rc)
  return setmetatable({ fd = master, pid = pid[0], screen = "", seen = 0 }, Pty)
end

-- Reads what is there within ms milliseconds; false once the other side closed.
function Pty:pump(ms)
  local fds = ffi.new("struct mwpty_pollfd[1]")
  fds[0].fd, fds[0].events = self.fd, 1
  if C.mwpty_poll(fds, 1, ms) <= 0 then return true end
  local buf = ffi.new("char[4096]")
  local n = C.mwpty_read(self.fd, buf, 4096)
  if n <= 0 then return false end
  self.screen = self.screen .. ffi.string(buf, n)
  return true
end

--- Everything written so far, without terminal control sequences and carriage returns.
function Pty:text()
  return (self.screen:gsub("\27%[[%d;?]*[%a@]", ""):gsub("\27[%(%)][%w]", ""):gsub("\27[=>]", "")
    :gsub("\r", ""))
end

--- Waits until plain (a literal string) appears in the text after what the last expect found;
-- fails, showing the text, after timeout seconds (default 20).
function Pty:expect(plain, timeout)
  local deadline = now() + (timeout or 20)
  while true do
    local text = self:text()
    local a, b = text:find(plain, self.seen + 1, true)
    if a then
      self.seen = b
      return text:sub(a, b)
    end
    if now() > deadline then
      error(("expected %q on the terminal within %gs; it shows:\n%s"):format(plain,
        timeout or 20, text), 2)
    end
    if not self:pump(50) then
      error(("the program ended before %q appeared; it showed:\n%s"):format(plain, text), 2)
    end
  end
end

--- Waits until the text ends with tail and nothing more comes for quiet seconds (default
-- 0.3): the program waits for input there (a prompt), not some earlier output that looks alike.
function Pty:settle(tail, quiet, timeout)
  local deadline = now() + (timeout or 20)
  quiet = quiet or 0.3
  local last, since = nil, now()
  while true do
    if not self:pump(20) then
      error(("the program ended while waiting for %q; it showed:\n%s"):format(tail, self:text()), 2)
    end
    local text = self:text()
    if text ~= last then last, since = text, now() end
    if text:sub(-#tail) == tail and now() - since >= quiet then
      self.seen = #text
      return
    end
    if now() > deadline then
      error(("expected the terminal to rest at %q within %gs; it shows:\n%s"):format(tail,
        timeout or 20, text), 2)
    end
  end
end

--- Types s (keys: "\r" is Enter, "\3" Ctrl-C, "\4" Ctrl-D, "\t" Tab, "\27[A" Up).
function Pty:send(s)
  assert(C.mwpty_write(self.fd, s, #s) == #s)
end

--- Waits up to timeout seconds for the program to end; returns its exit code, or nil if it did
-- not end (it is killed then).
function Pty:wait(timeout)
  local deadline = now() + (timeout or 20)
  local st = ffi.new("int[1]")
  while now() < deadline do
    self:pump(20)
    local r = C.mwpty_waitpid(self.pid, st, WNOHANG)
    if r == self.pid then
      C.mwpty_close(self.fd)
      self.fd = -1
      if st[0] % 128 ~= 0 then return nil, "signal " .. (st[0] % 128) end
      return math.floor(st[0] / 256) % 256
    end
  end
  self:kill()
  return nil, "still running"
end

--- Ends the program if it still runs.
function Pty:kill()
  if self.fd >= 0 then
    C.mwpty_kill(self.pid, SIGKILL)
    C.mwpty_waitpid(self.pid, ffi.new("int[1]"), 0)
    C.mwpty_close(self.fd)
    self.fd = -1
  end
end

return { spawn = spawn }
