-- block_spec.lua - block tasks (protocol.h, Block tasks): what the generator makes of one, and a
-- runtime's refusal while the executor does not run them.
local mw = require "moonwarp"
local support = require "spec.support"

local SOURCE = [[
task block void rowsum(const float *x, float *out, int n) {
  __shared__ float part[128], extra[4];
  __shared__ int
    count[2];
  float s = 0.0f;
  for (int i = thread; i < n; i += nthreads) s += x[index * n + i];
  part[thread] = s;
  barrier();
  if (thread == 0) { float t = 0.0f; for (int k = 0; k < nthreads; ++k) t += part[k]; out[index] = t; }
}
task void driver(const float *x, float *out, int n) { }
]]

-- the lines of text, numbered as the #line directives before them say (file "blk.cu")
local function user_lines(out)
  local lines, at = {}, nil
  for line in (out .. "\n"):gmatch("([^\n]*)\n") do
    local n, f = line:match('^#line (%d+) "([^"]*)"')
    if n then
      at = f == "blk.cu" and tonumber(n) or nil
    elseif at then
      lines[at] = (lines[at] or "") .. line .. "\n"
      at = at + 1
    end
  end
  return lines
end

describe("block tasks #sim", function()
  it("keep their __shared__ variables in a struct of their own, checked against the CTA's block area", function()
    for _, backend in ipairs({ "sim", "cuda" }) do
      local out, err = mw.generate(SOURCE, { chunkname = "blk.cu", backend = backend })
      assert.is_string(out, err)
      local members = out:match("struct mw_shared_rowsum {(.-)};")
      assert.truthy(members, out)
      assert.truthy(members:find("float part[128], extra[4];", 1, true), members)
      assert.truthy(members:find("int%s+count%[2%];"), members)
      local lines = user_lines(out)
      -- the size check at the first declaration's line, the references on the declarations' own
      assert.truthy(lines[2]:find("static_assert(sizeof(mw_shared_rowsum) <= MW_BLOCK_SMEM", 1, true), lines[2])
      assert.truthy(lines[2]:find("auto &part = _mw_sh.part; auto &extra = _mw_sh.extra;", 1, true), lines[2])
      assert.truthy(lines[3]:find("auto &count = _mw_sh.count;", 1, true), lines[3])
      assert.truthy(lines[5]:find("float s = 0.0f;", 1, true), lines[5])
      assert.truthy(lines[8]:find("barrier();", 1, true), lines[8])
      -- its body names the warp, the thread and the threads of the CTA
      assert.truthy(out:find("const unsigned thread = warp * 32u + lane;", 1, true))
      -- never run inline or as a call: its kind is a block kind, and no fast body is made for it
      assert.truthy(out:find("MW_KIND_BLOCK", 1, true))
      assert.falsy(out:find("mw_frame_rowsum::_mw_fast", 1, true))
    end
  end)

  it("are refused by a runtime while the executor does not run them", function()
    local rt = support.runtime("sim")
    local prog, log, code = rt:compile(SOURCE, "blk.cu")
    rt:close()
    assert.is_nil(prog)
    assert.equals("ECOMPILE", code)
    assert.truthy(log:find("blk.cu:1: task rowsum: block tasks are not run by this executor yet", 1, true), log)
  end)
end)
