-- bench_spec.lua - the benchmark suite runs end to end on sim and writes its table, CSV and plot,
-- and bench/core.lua its trace (figures are measured on a GPU; here only that it all works).
local support = require "spec.support"

-- Runs "luajit bench/<args>" with this process's module paths: the exit status and the output.
local function bench(args)
  return support.run(support.lua_paths() .. "luajit bench/" .. args)
end

-- bench/<args> exits with a failure and says text.
local function refuses(args, text)
  local status, out = bench(args)
  assert.are_not.equals(0, status, args .. ": " .. out)
  assert.truthy(out:find(text, 1, true), args .. ": " .. out)
end

-- Runs bench/suite.lua --quick on sim with a fake baselines program that prints lines: the
-- exit status, the output and bench.csv.
local function run_with(lines)
  local dir = os.tmpname()
  os.remove(dir)
  assert(os.execute("mkdir -p " .. support.shell_quote(dir)) == 0)
  local fake = dir .. "/baselines"
  local f = assert(io.open(fake, "w"))
  f:write("#!/bin/sh\n")
  for _, l in ipairs(lines) do f:write("echo '" .. l .. "'\n") end
  f:close()
  os.execute("chmod +x " .. support.shell_quote(fake))
  local env = support.lua_paths() .. "MW_BASELINES=" .. support.shell_quote(fake) .. " "
  local status, out = support.run(env .. "luajit bench/suite.lua --backend sim --quick --out "
    .. support.shell_quote(dir))
  local csv = assert(io.open(dir .. "/bench.csv")):read("*a")
  os.execute("rm -rf " .. support.shell_quote(dir))
  return status, out, csv
end

describe("bench/suite.lua #sim", function()
  it("prints a table and writes bench.csv and bench.svg with a row per figure", function()
    local dir = os.tmpname()
    os.remove(dir)
    assert(os.execute("mkdir -p " .. support.shell_quote(dir)) == 0)
    local env = support.lua_paths()
    local status, out = support.run(env .. "luajit bench/suite.lua --backend sim --quick --out "
      .. support.shell_quote(dir))
    assert.equals(0, status, out)
    for _, w in ipairs { "round trip", "dependent chain", "fork-join", "bulk", "pipeline",
      "block tasks", "dynamic fan-out", "buffers", "waits", "host spawns" } do
      assert.truthy(out:find("\n" .. w, 1, true), w .. " missing in:\n" .. out)
    end
    local csv = assert(io.open(dir .. "/bench.csv")):read("*a")
    local lines = {}
    for line in csv:gmatch("[^\n]+") do lines[#lines + 1] = line end
    assert.equals("workload,figure,unit,moonwarp,baseline,ratio", lines[1])
    assert.equals(21, #lines) -- 20 figures
    for i = 2, #lines do
      local value = tonumber(lines[i]:match('^"[^"]*","[^"]*",[^,]+,([^,]+),'))
      assert.is_true(value ~= nil and value > 0, lines[i])
    end
    local svg = assert(io.open(dir .. "/bench.svg")):read("*a")
    assert.truthy(svg:find("^<svg "))
    assert.truthy(svg:find("</svg>%s*$"))
    local bars = 0
    for _ in svg:gmatch("<rect ") do bars = bars + 1 end
    assert.equals(20, bars)
    os.execute("rm -rf " .. support.shell_quote(dir))
  end)

  it("puts each baseline beside its row with the ratio, and lists reference figures", function()
    local status, out, csv = run_with { "round trip/spawn->await p50,1000000",
      "round trip/ping-pong floor p50,2.5", "noise" }
    assert.equals(0, status, out)
    -- a p50 far below a second: the ratio baseline / moonwarp is large ("lower is better")
    local ratio = tonumber(out:match("spawn%->await p50%s+[%d.]+%s+us%s+1000000%.000%s+([%d.]+)x"))
    assert.is_true(ratio ~= nil and ratio > 100, out)
    assert.truthy(out:find("ping-pong floor p50", 1, true) and out:find("(reference)", 1, true), out)
    assert.truthy(csv:find('"round trip","spawn%->await p50",us,[%d.e+-]+,1000000,[%d.e+-]+\n'), csv)
  end)
end)

describe("bench/suite.lua's pipeline baseline #sim", function()

  it("is the CUDA graph with PDL where the run has it, the plain graph a reference line", function()
    local status, out, csv = run_with { "pipeline/3 stages, batch 1 (streams),30",
      "pipeline/3 stages, batch 1,12.5", "pipeline/3 stages, batch 1 (graph+PDL),9.5",
      "# pipeline graph+PDL: a note, not measured" }
    assert.equals(0, status, out)
    assert.truthy(out:find("3 stages, batch 1%s+[%d.]+%s+us%s+9%.500 %(graph%+PDL%)%s+[%d.]+x"), out)
    assert.truthy(out:find("3 stages, batch 1 %(graph%)%s+12%.500%s+%(reference%)"), out)
    assert.truthy(out:find("3 stages, batch 1 %(streams%)%s+30%.000%s+%(reference%)"), out)
    assert.falsy(out:find("(graph+PDL)%s+9%.500%s+%(reference%)"), out)
    assert.truthy(out:find("pipeline batch 1 vs a CUDA graph+PDL", 1, true), out)
    assert.truthy(csv:find('"pipeline","3 stages, batch 1",us,[%d.e+-]+,9.5,[%d.e+-]+\n'), csv)
  end)

  it("falls back to the plain CUDA graph where the run has no PDL figure", function()
    local status, out, csv = run_with { "pipeline/3 stages, batch 1 (streams),30",
      "pipeline/3 stages, batch 1,12.5" }
    assert.equals(0, status, out)
    assert.truthy(out:find("3 stages, batch 1%s+[%d.]+%s+us%s+12%.500%s+[%d.]+x"), out)
    assert.falsy(out:find("12%.500%s+%(reference%)"), out)
    assert.truthy(out:find("pipeline batch 1 vs a CUDA graph ", 1, true), out)
    assert.truthy(csv:find('"pipeline","3 stages, batch 1",us,[%d.e+-]+,12.5,[%d.e+-]+\n'), csv)
  end)
end)

describe("bench/core.lua #sim", function()
  it("records one more fib run into the file given with --trace", function()
    local path = os.tmpname()
    local env = support.lua_paths()
    local status, out = support.run(env .. "luajit bench/core.lua sim --trace "
      .. support.shell_quote(path))
    assert.equals(0, status, out)
    local written = tonumber(out:match("trace: (%d+) runs written"))
    assert.is_true(written ~= nil and written >= 8361, out) -- fib(18) is 8361 tasks
    local doc = require("dkjson").decode(assert(io.open(path)):read("*a"))
    os.remove(path)
    local slices = 0
    for _, e in ipairs(doc.traceEvents) do
      if e.ph == "X" then slices = slices + 1 end
    end
    assert.equals(written, slices)
  end)
end)

describe("bench/roundtrip.lua #sim", function()
  it("prints the round trip of a one-task program both ways, futures collected and closed", function()
    local status, out = bench("roundtrip.lua sim 20")
    assert.equals(0, status, out)
    for _, way in ipairs { "futures left to the collector", "each future closed after its await" } do
      local p50, p99 = out:match("Lua round trip on sim, a program of one task, 20, " .. way
        .. ": p50 ([%d.]+) us, p99 ([%d.]+) us")
      assert.truthy(p50, out)
      assert.is_true(tonumber(p50) > 0 and tonumber(p99) > 0, out)
    end
  end)

  it("refuses a count that is no whole number, saying so", function()
    refuses("roundtrip.lua sim 1.5", "the count must be a whole number >= 1, got '1.5'")
  end)

  it("runs beside tasks of padding and a spawning task that never run, and says so", function()
    local status, out = bench("roundtrip.lua sim 10 2 16")
    assert.equals(0, status, out)
    assert.truthy(out:match("Lua round trip on sim, a program of one task, 10, futures left to the collector, "
      .. "2 tasks of padding of 16 steps: p50 [%d.]+ us"), out)
    status, out = bench("roundtrip.lua sim 10 0 256 1")
    assert.equals(0, status, out)
    assert.truthy(out:match("Lua round trip on sim, a program of one task, 10, each future closed after its await, "
      .. "a task that spawns beside it: p50 [%d.]+ us"), out)
  end)

  it("refuses padding or steps that are no whole numbers, saying so", function()
    refuses("roundtrip.lua sim 10 -1", "pad must be a whole number >= 0, got '-1'")
    refuses("roundtrip.lua sim 10 1 0", "steps must be a whole number >= 1, got '0'")
    refuses("roundtrip.lua sim 10 abc", "pad must be a whole number >= 0, got 'abc'")
    refuses("roundtrip.lua sim 10 0 256 x", "spawns must be a whole number >= 0, got 'x'")
    refuses("roundtrip.lua sim 10 0 256 0 0", "frame_bytes must be a whole number >= 1, got '0'")
  end)
end)

describe("bench/holds.lua #sim", function()
  it("refuses a worker or round count that is no whole number, saying so", function()
    local usage = "usage: luajit bench/holds.lua [backend [workers [rounds]]] (workers and rounds whole numbers from 1)"
    refuses("holds.lua sim x", usage)
    refuses("holds.lua sim 8 0", usage)
    refuses("holds.lua sim 8 2.5", usage)
  end)
end)

describe("bench/fibscale.lua #sim", function()
  it("prints fib's tasks per second and steals at each size asked", function()
    local env = support.lua_paths()
    local status, out = support.run(env .. "luajit bench/fibscale.lua sim 2 10 12")
    assert.equals(0, status, out)
    assert.truthy(out:find("on sim, 2 workers", 1, true), out)
    -- fib(10) is 177 tasks, fib(12) 465
    assert.truthy(out:match("\n10%s+177%s+[%d.]+%s+[%d.]+%s+%d+"), out)
    assert.truthy(out:match("\n12%s+465%s+[%d.]+%s+[%d.]+%s+%d+"), out)
  end)

  it("refuses a worker count or a size that is no whole number, saying which", function()
    local env = support.lua_paths()
    local status, out = support.run(env .. "luajit bench/fibscale.lua sim many")
    assert.are_not.equals(0, status, out)
    assert.truthy(out:find('workers must be a whole number (0: the runtime\'s default), got "many"', 1, true), out)
    status, out = support.run(env .. "luajit bench/fibscale.lua sim 2 12.5")
    assert.are_not.equals(0, status, out)
    assert.truthy(out:find('each n must be a whole number from 1 to 40, got "12.5"', 1, true), out)
  end)
end)

describe("bench/blocks.lua #sim", function()
  local env = support.lua_paths()
  it("prints the block-task matmul's and softmax's rates at the worker count asked", function()
    local status, out = support.run(env .. "luajit bench/blocks.lua sim 8")
    assert.equals(0, status, out)
    assert.truthy(out:find("block tasks on sim, 8 workers", 1, true), out)
    local mm = tonumber(out:match("\nmatmul 128 x 128%s+([%d.]+) GFLOP/s"))
    local sm = tonumber(out:match("\nsoftmax 256 rows of 256%s+([%d.]+) GB/s"))
    assert.is_true(mm ~= nil and mm > 0, out)
    assert.is_true(sm ~= nil and sm > 0, out)
  end)

  it("refuses a worker count below one worker CTA or no whole number, saying which", function()
    for _, w in ipairs { "3", "6.5", "many" } do
      refuses("blocks.lua sim " .. w, 'workers must be a whole number of at least 4 (one worker CTA), got "' .. w .. '"')
    end
  end)
end)

describe("bench/block_fault.lua #sim", function()
  local env = support.lua_paths()
  it("runs the block tasks in the suite's runtime and in each of its differences, and says so", function()
    for _, m in ipairs { "plain", "f512", "tasks512", "cold512", "loaded512", "primed512", "dropped512" } do
      local status, out = support.run(env .. "luajit bench/block_fault.lua sim " .. m)
      assert.equals(0, status, out)
      assert.truthy(out:find("sim, " .. m .. ": ran, 0 grids launched from the device", 1, true), out)
      assert.truthy(out:find("matmul 128 x 128", 1, true), out)
    end
    local status, out = support.run(env .. "luajit bench/block_fault.lua sim after512")
    assert.equals(0, status, out)
    assert.truthy(out:find("sim, after512 (before the bench programs): ran", 1, true), out)
    assert.truthy(out:find("sim, after512 (with the bench programs): ran", 1, true), out)
  end)

  it("refuses an unknown mode, and a stack budget that is not a number", function()
    local status, out = support.run(env .. "luajit bench/block_fault.lua sim other")
    assert.are_not.equals(0, status, out)
    assert.truthy(out:find("mode: plain, f512, tasks512, cold512, after512, loaded512, primed512 or dropped512", 1, true), out)
    status, out = support.run(env .. "luajit bench/block_fault.lua sim plain lots")
    assert.are_not.equals(0, status, out)
    assert.truthy(out:find("stack_bytes: a number of bytes, got lots", 1, true), out)
  end)
end)

describe("bench/profile_chain.lua #sim", function()
  it("runs a stream of host spawns to the last completion, and round trips one at a time", function()
    local status, out = bench("profile_chain.lua sim 300 4 stream")
    assert.equals(0, status, out)
    assert.truthy(out:find("300 host spawns in a stream in ", 1, true), out)
    -- where the spawn call waited: 300 spawns fit the 4096 inbox cells and the host futures
    assert.truthy(out:find("in 0 waits for a host future, [%d.]+ s in 0 waits for an inbox cell"), out)
    status, out = bench("profile_chain.lua sim 50 4 roundtrip")
    assert.equals(0, status, out)
    assert.truthy(out:find("50 round trips in ", 1, true), out)
  end)

  it("refuses an unknown mode and counts that are no whole numbers, saying what it takes", function()
    for _, args in ipairs { "300 4 streams", "0 4 stream", "2.5 4 roundtrip", "abc", "10 x chain", "10 4 pipeline 0" } do
      refuses("profile_chain.lua sim " .. args, "(hops and batch whole numbers from 1, workers from 0)")
    end
  end)
end)
