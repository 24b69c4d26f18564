-- messages_spec.lua - failure messages longer than the room a future has for them (95
-- characters on the device) end with a visible "..." where they were cut; shorter ones come
-- back whole.
local support = require "spec.support"

local LONG = ("abcdefghij"):rep(15) -- 150 characters
-- a chunkname long enough that the sim's divergence message does not fit
local FILE = "a_program_with_a_long_name_as_scripts_in_deep_directories_have.cu"

local SOURCE = [[
task int leaf(int x) { return x; }
task int longfail(int x) { fail(3, "]] .. LONG .. [["); return 0; }
task int shortfail(int x) { fail(3, "short"); return 0; }
task int parent(int x) {
  local future a;
  a = spawn(longfail, 1);
  await(a);
  return 0;
}
task int split(int x) {
  local future f;
  if (lane < 16)
    f = spawn(leaf, 1);
  else
    __syncwarp();
  return 0;
}
]]

describe("failure messages #sim", function()
  local rt, prog
  setup(function()
    rt = support.runtime("sim")
    prog = support.compile(rt, SOURCE, FILE)
  end)
  teardown(function() rt:close() end)

  local function failure(task)
    local err = support.error_of(function() return prog[task](0):await(30) end)
    assert.is_string(err)
    return err
  end

  it("that do not fit end with '...' where they were cut", function()
    local err = failure("longfail")
    assert.equals("longfail: " .. LONG:sub(1, 95 - #"longfail: ") .. "...", err)
  end)

  it("that fit come back whole, without a mark", function()
    assert.equals("shortfail: short", failure("shortfail"))
  end)

  it("keep one mark when a parent fails with its child's cut message", function()
    local err = failure("parent")
    assert.equals("longfail: " .. LONG:sub(1, 95 - #"longfail: ") .. "...", err)
  end)

  it("from the sim's divergence check are marked where they were cut", function()
    local err = failure("split")
    assert.truthy(err:find("^split: lanes of warp %d+ diverged"), err)
    assert.truthy(err:find("...", 1, true) == #err - 2, err)
    assert.falsy(err:find("......", 1, true), err)
  end)
end)
