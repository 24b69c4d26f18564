local NKINDS = tonumber(NK or 2100)
local COLLIDING = {}
for k = 5, NKINDS - 1, 32 do COLLIDING[#COLLIDING + 1] = k end
local parts = {}
for k = 0, NKINDS - 1 do parts[#parts + 1] = ("task int k%d(int x) { return x + %d; }"):format(k, k) end
parts[#parts + 1] = [[
task long sweep(int x, int reps) {
  local future f;
  local long s;
  local int r;
  s = 0;
  for (r = 0; r < reps; ++r) {]]
for _, k in ipairs(COLLIDING) do
  parts[#parts + 1] = ("    f = spawn(k%d, x); await(f); s += (long)value(f); release(f);"):format(k)
end
parts[#parts + 1] = "  }\n  return s;\n}"
return table.concat(parts, "\n")
