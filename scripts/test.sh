#!/usr/bin/env bash
# test.sh - the test command: installs what is missing (Debian, as root), builds in build/ and
# runs every spec with busted under LuaJIT; exits with busted's status. Arguments go to busted:
#   bash scripts/test.sh                      # the everyday specs: all but the #slow ones (the C
#                                             # tests, the fuzz target, install trees, the rock,
#                                             # the terminal, NVRTC without a GPU, a close
#                                             # that waits out its deadline); #gpu ones skip
#                                             # without a GPU
#   bash scripts/test.sh --all                # every spec, the #slow ones too (CI runs them)
#   bash scripts/test.sh --tags=gpu           # only the GPU specs
#   bash scripts/test.sh spec/api_spec.lua    # one file
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
mw_prepare || exit 1
cd "$MW_ROOT"
status=0
args=("$@")
if [ $# -eq 0 ]; then
  args=(--exclude-tags=slow)
elif [ "$1" = --all ]; then
  args=("${@:2}")
fi
mw_busted -o spec/output/summary.lua \
  --lpath="$MW_BUILD_DIR/lua/?.lua;$MW_BUILD_DIR/lua/?/init.lua" \
  --cpath="$MW_BUILD_DIR/lua/?.so" ${args[@]+"${args[@]}"} || status=$?
exit "$status"
