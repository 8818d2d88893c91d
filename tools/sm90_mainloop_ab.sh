#!/usr/bin/env bash
# Builds tools/sm90_mainloop_ab.cu for the sm90 configs `auto` runs on the DESIGN shapes and runs each on the cells
# where it is chosen (docs/perf-notes/2026-11-26-sm90-word-addressed-weight-reads.md has the table this printed;
# docs/perf-notes/2026-11-27-sm90-conversion-across-k-tiles.md the 128 x 128 rows since they convert two ahead).
# On the GPU machine, from the repository root, with nvcc and the nvidia-cutlass wheel installed:
#   bash tools/sm90_mainloop_ab.sh             # all configs (each build ~4 min on one core; they build in parallel)
#   CONFIGS="64x128_coop_streamk" bash tools/sm90_mainloop_ab.sh
set -euo pipefail
cd "$(dirname "$0")/.."
NVCC=${NVCC:-nvcc}
CUTLASS_INCLUDE=${CUTLASS_INCLUDE:-$(python3 -c "import cutlass_library, os; \
print(os.path.join(os.path.dirname(cutlass_library.__file__), 'source', 'include'))")}
BUILD=${BUILD:-/tmp/sm90_mainloop_ab}
mkdir -p "$BUILD"
# Config (tokens x weight columns, schedule, tile scheduler; zero points) -> cells (KxN:M) where auto runs it.
declare -A CELLS=(
  [256x128_coop_persistent]="8192x28672:4096 8192x8192:4096 4096x4096:1024 8192x8192:1024"
  [64x128_coop_streamk]="4096x4096:64 4096x4096:128 4096x11008:64 11008x4096:64"
  [256x64_pingpong_persistent]="4096x4096:512 8192x8192:256 11008x4096:512"
  [128x256_coop_streamk]="8192x28672:128 28672x8192:128"
  [64x256_coop_streamk]="8192x28672:64 28672x8192:64"
  [128x128_coop_streamk]="4096x4096:256 11008x4096:128 4096x11008:128"
)
names=${CONFIGS:-${!CELLS[@]}}
for name in $names; do
  IFS=_ read -r tile schedule scheduler <<<"$name"
  [ "$schedule" = coop ] && S=kCooperative || S=kPingpong
  [ "$scheduler" = streamk ] && R=kStreamK || R=kPersistent
  $NVCC -O3 -DNDEBUG -std=c++17 --expt-relaxed-constexpr --generate-code=arch=compute_90a,code=[sm_90a] -I cpp \
    -I "$CUTLASS_INCLUDE" -DAB_TILE_M=${tile%x*} -DAB_TILE_N=${tile#*x} -DAB_SCHEDULE=$S -DAB_SCHEDULER=$R \
    -DAB_ZEROS=1 tools/sm90_mainloop_ab.cu -o "$BUILD/$name" &
done
wait
for name in $names; do "$BUILD/$name" ${CELLS[$name]}; done
