#!/usr/bin/env bash
# run.sh - runs a Lua script with the module built in build/ (installing and building first):
#   bash scripts/run.sh examples/fib.lua [args...]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
mw_prepare || exit 1
exec luajit "$@"
