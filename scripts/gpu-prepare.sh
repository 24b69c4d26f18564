#!/usr/bin/env bash
# gpu-prepare.sh - run here, before the first run on a GPU machine that has no Lua: fills .gpu/
# (git-ignored) with LuaJIT, busted and the libraries the build needs, as Debian packages, and
# env.sh to source there. Then carry .gpu and run: bash scripts/gpu.sh
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
bash ../shared/gpu/prepare.sh
[ -n "$(ls /var/lib/apt/lists/ 2>/dev/null | grep -i debian | head -1)" ] || apt-get update -qq
(cd .gpu/debs && apt-get download -qq libsodium23 libsodium-dev >/dev/null 2>&1)
echo "ready: $(ls .gpu/debs | wc -l) packages in .gpu/debs"
