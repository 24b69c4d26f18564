#!/usr/bin/env bash
# gpu-prepare.sh - run here, before the first run on a GPU machine that has no Lua: fills .gpu/
# (git-ignored) with LuaJIT, busted and the libraries the build needs, as Debian packages, and
# env.sh to source there. Then carry .gpu and run: bash scripts/gpu.sh
#   bash scripts/gpu-prepare.sh [REF...]
# Each REF (a branch, tag or commit) is also copied into .gpu/trees/REF (a '/' in it becomes
# '_'), with a .gpu/env.sh of its own that sources the main one, so that one call on the GPU
# machine can measure a branch beside the working tree, each in a build folder of its own:
#   bash .gpu/trees/REF/scripts/gpu.sh $OUT/REF core
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
# every REF checked before anything is downloaded or removed; its folder name is made of
# letters, digits and . _ - ~ only, never "." or ".." (a '/' becomes '_')
for ref in "$@"; do
  git rev-parse --verify -q "$ref^{commit}" >/dev/null || { echo "gpu-prepare: no such commit: $ref" >&2; exit 2; }
  name=${ref//\//_}
  if [[ ! $name =~ ^[A-Za-z0-9._~^-]+$ || $name == . || $name == .. ]]; then
    echo "gpu-prepare: cannot name a folder after '$ref'; name a branch, a tag or a commit id" >&2
    exit 2
  fi
done
bash ../shared/gpu/prepare.sh
[ -n "$(ls /var/lib/apt/lists/ 2>/dev/null | grep -i debian | head -1)" ] || apt-get update -qq
(cd .gpu/debs && apt-get download -qq libsodium23 libsodium-dev >/dev/null 2>&1)
echo "ready: $(ls .gpu/debs | wc -l) packages in .gpu/debs"
for ref in "$@"; do
  dir=.gpu/trees/${ref//\//_}
  rm -rf "$dir" && mkdir -p "$dir/.gpu"
  git archive "$ref" | tar -x -C "$dir"
  # the tree's gpu.sh sources its own .gpu/env.sh: the main one, whose packages it unpacks
  printf '# the environment of the tree this copy came from (scripts/gpu-prepare.sh)\nsource "$(dirname "${BASH_SOURCE[0]}")/../../../env.sh"\n' >"$dir/.gpu/env.sh"
  git rev-parse --short "$ref" >"$dir/.gpu/commit" # the commit, for the figures' headings (gpu.sh ab)
  echo "tree: $ref ($(git rev-parse --short "$ref")) in $dir: bash $dir/scripts/gpu.sh OUT steps..."
done
