-- fuzz_spec.lua - random inputs where users type: mutated task sources into the parser and
-- generator (a clean error or a program, never a crash), and random Lua values into task
-- arguments (a clean "bad argument" error or the value the C type holds). Each run prints its
-- seed; MW_FUZZ_SEED=n repeats one.
local mw = require "moonwarp"
local support = require "spec.support"
local ffi = require "ffi"

local seed = tonumber(os.getenv("MW_FUZZ_SEED")) or 20261202

local BASE = {
  support.FIB,
  "task void scale(float *x, float s, int n) {\n  for (int i = lane; i < n; i += 32) x[i] *= s;\n}\n",
  "/* helpers */\n__device__ int sq(int x) { return x * x; }\n"
    .. "task int f(int a, double b, future c) {\n  local int k;\n  k = sq(a);\n  await(c);\n"
    .. "  return k + (int)b + (int)value(c);\n}\n",
}

local PIECES = { "{", "}", "(", ")", ";", ",", "task ", "local ", "future ", "*", "\"", "'", "/*",
  "*/", "//", "\n", "#define X 1\n", "int ", "void ", "x", "[3]", "await(a);", "spawn(fib, 1)",
  "\\", "task int", "&", "<", ">", " " }

local function mutate(src)
  local s = src
  for _ = 1, math.random(1, 4) do
    local at = math.random(1, #s + 1)
    local op = math.random(1, 3)
    if op == 1 then -- delete a range
      s = s:sub(1, at - 1) .. s:sub(at + math.random(1, 8))
    elseif op == 2 then -- insert a piece
      s = s:sub(1, at - 1) .. PIECES[math.random(#PIECES)] .. s:sub(at)
    else -- duplicate a range
      local len = math.random(1, 12)
      s = s:sub(1, at - 1) .. s:sub(at, at + len) .. s:sub(at)
    end
  end
  return s
end

describe("fuzzing the task parser and generator (seed " .. seed .. ")", function()
  it("answers every mutated source with a program or an error naming the file", function()
    math.randomseed(seed)
    local programs, errors = 0, 0
    for i = 1, 3000 do
      local src = mutate(BASE[math.random(#BASE)])
      local ok, out, err, code = pcall(mw.generate, src, { chunkname = "p.cu" })
      assert(ok, ("iteration %d raised %s for:\n%s"):format(i, tostring(out), src))
      if out then
        programs = programs + 1
        assert.is_string(out)
      else
        errors = errors + 1
        assert(code == "ECOMPILE", ("iteration %d: code %s for:\n%s"):format(i, tostring(code), src))
        assert(err:find("^p%.cu:%d+: "), ("iteration %d: message %q"):format(i, err))
      end
    end
    print(("  [parser: 3000 mutated sources, %d generated, %d refused with file:line]"):format(
      programs, errors))
    assert.is_true(programs > 0 and errors > 0)
  end)

  it("has NVRTC report errors of mutated programs at the user's lines", function()
    math.randomseed(seed + 1)
    local compiled, refused = 0, 0
    while compiled + refused < 8 do
      local src = mutate(BASE[math.random(#BASE)])
      if mw.generate(src, { chunkname = "p.cu" }) then
        local cubin, log, code = mw.compile_cubin(src, { chunkname = "p.cu" })
        if cubin then
          compiled = compiled + 1
        else
          refused = refused + 1
          assert(code == "ECOMPILE", tostring(log))
          assert(log:find("p.cu(", 1, true), ("no user line in the log of:\n%s\n%s"):format(src, log))
        end
      end
    end
    print(("  [NVRTC: 8 mutated programs, %d compiled, %d refused at user lines]"):format(compiled,
      refused))
  end)
end)

describe("fuzzing task arguments #sim (seed " .. seed .. ")", function()
  local rt, prog
  setup(function()
    rt = support.runtime("sim")
    prog = support.compile(rt, [[
task int8_t e_i8(int8_t x) { return x; }
task uint8_t e_u8(uint8_t x) { return x; }
task short e_i16(short x) { return x; }
task unsigned e_u32(unsigned x) { return x; }
task int e_i32(int x) { return x; }
task long long e_i64(long long x) { return x; }
task float e_f32(float x) { return x; }
task double e_f64(double x) { return x; }
task bool e_bool(bool x) { return x; }
]], "echo.cu")
  end)
  teardown(function() rt:close() end)

  local ranges = {
    e_i8 = { -128, 127 }, e_u8 = { 0, 255 }, e_i16 = { -32768, 32767 },
    e_u32 = { 0, 4294967295 }, e_i32 = { -2147483648, 2147483647 },
    e_i64 = { -2 ^ 63, 2 ^ 63 - 1 },
  }

  local function random_value()
    local r = math.random(1, 10)
    if r == 1 then return "7" end
    if r == 2 then return nil end
    if r == 3 then return {} end
    if r == 4 then return 0 / 0 end
    if r == 5 then return (math.random(2) == 1 and 1 or -1) * math.huge end
    if r == 6 then return math.random() * 1000 - 500 end -- fractional
    if r == 7 then return true end
    local mag = 2 ^ math.random(0, 66)
    return math.floor((math.random() * 2 - 1) * mag)
  end

  it("returns what the C type holds, or raises a bad argument error", function()
    math.randomseed(seed)
    local names = { "e_i8", "e_u8", "e_i16", "e_u32", "e_i32", "e_i64", "e_f32", "e_f64", "e_bool" }
    local accepted, refused = 0, 0
    for i = 1, 600 do
      local name = names[math.random(#names)]
      local v = random_value()
      local ok, f = pcall(prog[name], v)
      local what = ("iteration %d: %s(%s)"):format(i, name, tostring(v))
      if ok then
        accepted = accepted + 1
        local got = f:await(30)
        if name == "e_f64" then
          assert(got == v or (v ~= v and got ~= got), what .. " returned " .. tostring(got))
        elseif name == "e_f32" then
          local want = tonumber(ffi.new("float", v))
          assert(got == want or (want ~= want and got ~= got), what .. " returned " .. tostring(got))
        elseif name == "e_bool" then
          assert(got == v, what .. " returned " .. tostring(got))
        else
          local lo, hi = ranges[name][1], ranges[name][2]
          assert(type(v) == "number" and v == math.floor(v) and v >= lo and v <= hi,
            what .. " was accepted")
          if name ~= "e_i64" or math.abs(v) < 2 ^ 53 then
            assert(got == v, what .. " returned " .. tostring(got))
          end
        end
      else
        refused = refused + 1
        assert(tostring(f):find("bad argument #1 to '" .. name .. "'", 1, true),
          what .. " raised " .. tostring(f))
      end
    end
    print(("  [arguments: 600 random values, %d passed through, %d refused]"):format(accepted, refused))
    assert.is_true(accepted > 0 and refused > 0)
  end)
end)
