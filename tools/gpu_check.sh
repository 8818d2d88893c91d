#!/usr/bin/env bash
# The developer's GPU check (DESIGN.md section 6): on a GPU machine without network, install and build
# mixgemm, run every test (GPU ones included), compute-sanitizer on a small grid, and a short benchmark;
# print a summary table last. Logs go to $OUT (the device tool's output folder) or ./gpu-check-out.
#
#   bash tools/gpu_check.sh            # everything
#   SKIP_SANITIZER=1 SKIP_BENCH=1 ...  # parts
#   SANITIZE_ARGS="--only sm90" ...    # the sanitizer on the sm90 (or "--only decode") kernels alone
#   PYTEST_TARGETS="paths/test_decode_gpu.py" ...   # some tests only (paths under tests/)
#   PROBE=1 ...                        # also tools/path_probe.py (every kernel path on the DESIGN shapes)
#   NCU="8192x28672:1:gemv_kernel" ... # also Nsight Compute on the auto path's kernel (tools/ncu_targets.py);
#                                        a target "KxN:M:regex:layout:config" names the layout and config,
#                                        NCU_SECTIONS adds sections (e.g. "WarpStateStats SchedulerStats")
#   NCU_PEERS="8192x8192:16:ist_marlin[sym] 8192x8192:16:mixgemm[sym]" ...  # also Nsight Compute on harness
#                                        peers' calls (tools/ncu_targets.py --peer; the peers in .peers/ or
#                                        NCU_PEERS_DIR), every kernel of NCU_CALLS calls (2)
#   POWER_ARGS="--peers-dir .peers --peers mixgemm[zp],cublas_fp16" ...  # also clock and power at steady state
#                                        (tools/power_clock_probe.py, M = 4096 on the two largest shapes by default)
#   SWEEP_CELLS="28672x8192:96,128 4096x5120:144" SWEEP_LAYOUT=sm90 ...  # also `python -m mixgemm sweep` per cell
#                                        (--rounds SWEEP_ROUNDS, 3, plus SWEEP_EXTRA, e.g. "--after-elementwise"
#                                        for a model's order), each into $OUT/sweep_KxN_mMs/, and
#                                        tools/sweep_summary.py's lines (auto's pick against the fastest config)
#   PEERS="2048x8192:16 4096x4096:16,256" ...  # also the peers harness (PEERS_DIR, default .peers: a copy of
#                                        ../shared/peers carried into the tree) per cell, all its peers, --rounds
#                                        PEERS_ROUNDS (3) plus PEERS_EXTRA, each into $OUT/peers_KxN_mMs/; its rows printed
#   SKIP_PYTEST=1 ...                    # no test run (a sweep-only call)
#   PACK_EXTENSION=1 ...                 # the built extension, xz-compressed in 15 MiB pieces
#                                        ($OUT/extension.so.xz.part-aa, -ab: under the device tool's 16 MiB a file)
#   PREBUILT="prebuilt/extension.so.xz.part-*" ...  # no build: those pieces, from a build of this tree's C++ for
#                                        this Python, unpacked into python/mixgemm/ (PYTHONPATH=python)
#   PACK=1 ...                           # every output but the extension's pieces moved into $OUT/results.tgz
#                                        (the device tool brings back at most 8 files)
# A call carrying PREBUILT's pieces (~16 MB) or the peers (~26 MB) passes the device tool's 64 MiB with the tracked
# sweep records (~45 MB) in the tree: park them for the call (bash tools/park_sweep_records.sh out / in).
# Needs: python3 with torch, pybind11, scikit-build-core, cmake, ninja; nvcc; the nvidia-cutlass wheel in
# .whl/ (or already installed).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu-check-out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
declare -a SUMMARY=()
status=0
record() {  # name, rc, detail
  local verdict=PASS
  [ "$2" -eq 0 ] || { verdict=FAIL; status=1; }
  SUMMARY+=("$(printf '%-22s %-5s %s' "$1" "$verdict" "$3")")
}
# A "KxN:M,M" cell of SWEEP_CELLS or PEERS (what, cell): sets shape and ms, or records the cell as not one (rc 1).
parse_cell() {
  if [[ ! "$2" =~ ^[0-9]+x[0-9]+:[0-9]+(,[0-9]+)*$ ]]; then
    record "$1 $2" 1 "not KxN:M,M"
    return 1
  fi
  shape=${2%%:*}
  ms=${2#*:}
}

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"

# 1. Install: CUTLASS headers wheel (no deps: headers only), then our build, no isolation (no network); or a
# carried build of the same C++ (PREBUILT), which saves the build's minutes of device time on a later call.
if [ -n "${PREBUILT:-}" ]; then
  so_name=$(python3 -c "import sysconfig; print('_C' + sysconfig.get_config_var('EXT_SUFFIX'))")
  # PREBUILT is a glob of pieces, in order: unquoted on purpose.
  cat $PREBUILT | xz -dc >"python/mixgemm/$so_name"
  rc=$?
  export PYTHONPATH=$PWD/python${PYTHONPATH:+:$PYTHONPATH}
  python3 -c "import mixgemm._C as c; print('prebuilt extension:', c.__file__)" >"$OUT/build.log" 2>&1 || rc=1
  record build $rc "prebuilt ($PREBUILT), $(tail -n 1 "$OUT/build.log")"
  if [ $rc -ne 0 ]; then cat "$OUT/build.log"; printf '%s\n' "${SUMMARY[@]}"; exit 1; fi
else
  if ls .whl/nvidia_cutlass-*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps .whl/nvidia_cutlass-*.whl 2>&1 | tail -n 2
  fi
  # One architecture (this GPU's, with its sm_90a-only sm90 path) keeps the device build short; the default build is
  # 80;90a.
  export MIXGEMM_CUDA_ARCHS=${MIXGEMM_CUDA_ARCHS:-90a}
  export MIXGEMM_KERNELS=${MIXGEMM_KERNELS:-full}
  export CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-16}
  start=$(date +%s)
  python3 -m pip install --no-build-isolation --no-deps -v . >"$OUT/build.log" 2>&1
  rc=$?
  record build $rc "$(( $(date +%s) - start )) s, archs $MIXGEMM_CUDA_ARCHS, kernels $MIXGEMM_KERNELS"
  grep -E "spill|warning" "$OUT/build.log" | grep -v "0 bytes spill" | head -n 20 >"$OUT/build_warnings.txt"
  if [ $rc -ne 0 ]; then tail -n 40 "$OUT/build.log"; printf '%s\n' "${SUMMARY[@]}"; exit 1; fi
  if [ -n "${PACK_EXTENSION:-}" ]; then
    # Run outside the tree, so the import finds the installed build, not python/.
    so=$(cd / && python3 -c "import mixgemm._C as c; print(c.__file__)")
    xz -T0 -c "$so" | split -b 15M - "$OUT/extension.so.xz.part-"
    record "pack extension" $? "$(ls "$OUT"/extension.so.xz.part-* | wc -l) pieces of $(basename "$so")"
  fi
fi

# 2. Every test, GPU ones included (--require-gpu: a missing GPU is an error, not a deselection).
if [ -z "${SKIP_PYTEST:-}" ]; then
  ( cd tests && python3 -m pytest -q --require-gpu -p no:cacheprovider --maxfail=20 ${PYTEST_TARGETS:-.} ) \
    >"$OUT/pytest.log" 2>&1
  rc=$?
  record pytest $rc "$(tail -n 1 "$OUT/pytest.log")"
  [ $rc -eq 0 ] || tail -n 60 "$OUT/pytest.log"
fi

# 3. compute-sanitizer on a small grid of every kernel.
if [ -z "${SKIP_SANITIZER:-}" ]; then
  for tool in memcheck racecheck; do
    compute-sanitizer --tool $tool --error-exitcode 9 python3 tools/sanitize_small.py ${SANITIZE_ARGS:-} >"$OUT/sanitizer_$tool.log" 2>&1
    rc=$?
    record "sanitizer $tool" $rc "$(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/sanitizer_$tool.log" | tail -n 1)"
  done
fi

# 4. Eager host overhead (issue 9) and the whole-model example (issue 12) on a small LLaMA-style config.
if [ -z "${SKIP_OVERHEAD:-}" ]; then
  python3 -m mixgemm overhead --out "$OUT" >"$OUT/overhead.log" 2>&1
  record "overhead" $? "table in overhead.log"
  cat "$OUT/overhead.log"
fi
if [ -z "${SKIP_EXAMPLE:-}" ] && python3 -c "import transformers" 2>/dev/null; then
  python3 examples/quantized_llama.py --size "${EXAMPLE_SIZE:-small}" >"$OUT/example.log" 2>&1
  record "example" $? "$(tail -n 1 "$OUT/example.log")"
  tail -n 25 "$OUT/example.log"
fi

# 5. The path probe (tools/path_probe.py), when asked for, then a short benchmark (DESIGN.md section 7
# protocol; full tables in $OUT).
if [ -n "${PROBE:-}" ]; then
  python3 tools/path_probe.py ${PROBE_ARGS:-} >"$OUT/path_probe.log" 2>&1
  record "path probe" $? "table in path_probe.log"
  grep -E "best|wrote" "$OUT/path_probe.log"
fi
if [ -z "${SKIP_BENCH:-}" ]; then
  python3 -m mixgemm dequant --out "$OUT" >"$OUT/bench_dequant.log" 2>&1
  record "bench dequant" $? "$(tail -n 1 "$OUT/bench_dequant.log")"
  python3 -m mixgemm bench --shapes "${BENCH_SHAPES:-quick}" ${BENCH_ARGS:-} --out "$OUT" >"$OUT/bench.log" 2>&1
  record "bench gemm" $? "table in bench.log"
  cat "$OUT/bench_dequant.log" "$OUT/bench.log"
fi

# 6. Nsight Compute, when asked for: the speed-of-light and occupancy sections of the auto path's kernel for
# each "KxN:M:kernel-regex" in NCU (e.g. NCU="8192x28672:4096:device_kernel 8192x28672:1:gemv_kernel").
for target in ${NCU:-}; do
  IFS=: read -r shape m regex layout config <<<"$target"
  sections=()
  for s in SpeedOfLight Occupancy MemoryWorkloadAnalysis ${NCU_SECTIONS:-}; do sections+=(--section "$s"); done
  log="$OUT/ncu_${shape}_m${m}${layout:+_$layout}${config:+_$config}.log"
  ncu -k "regex:$regex" -s 2 -c 1 "${sections[@]}" python3 tools/ncu_targets.py --shape "$shape" --m "$m" \
    --layout "${layout:-auto}" --config "${config:-auto}" >"$log" 2>&1
  record "ncu $shape M=$m" $? "$(basename "$log")"
  grep -E "Duration|Throughput|Pipe|Achieved Occupancy|Registers Per|Warp Cycles|Block Limit|Stall|Issued|Eligible" \
    "$log" | head -n 40
done

# 6b. Nsight Compute on peers' calls beside ours, when asked for: each "KxN:M:peer" in NCU_PEERS, the calls
# inside a profiler range (so -c counts their kernels: a split-K pair's two), with the metrics the ncu record
# keeps (benchmarks/2026-11-27-h100-ncu-m16-m32-m4096.json). Peer names hold [ ], which must not glob.
set -f
for target in ${NCU_PEERS:-}; do
  IFS=: read -r shape m peer <<<"$target"
  calls=${NCU_CALLS:-2}
  log="$OUT/ncu_peer_${shape}_m${m}_$(echo "$peer" | tr -c 'A-Za-z0-9_.-' '_').log"
  ncu --profile-from-start off -c $((calls * 4)) --section SpeedOfLight --section LaunchStats --section Occupancy \
    --section SchedulerStats --section WarpStateStats --section MemoryWorkloadAnalysis \
    --metrics smsp__inst_executed.sum,smsp__inst_executed_pipe_tensor.sum,dram__bytes_read.sum,lts__t_bytes.sum,sm__cycles_elapsed.avg \
    python3 tools/ncu_targets.py --shape "$shape" --m "$m" --calls "$calls" --peer "$peer" \
    --peers-dir "${NCU_PEERS_DIR:-.peers}" >"$log" 2>&1
  record "ncu $shape M=$m $peer" $? "$(basename "$log")"
  grep -E "Duration|inst_executed|lts__t_bytes|dram__bytes|cycles_elapsed|Eligible|Registers Per|Grid Size" \
    "$log" | head -n 40
done
set +f

# 7. Clock, power and cycles a call at steady state, when asked for (the power-bound cells): POWER_ARGS are the
# probe's flags; peer names hold [ ], which must not glob.
if [ -n "${POWER_ARGS:-}" ]; then
  set -f
  python3 tools/power_clock_probe.py $POWER_ARGS --out "$OUT/power_clock.json" >"$OUT/power_clock.log" 2>&1
  rc=$?
  set +f
  record "power probe" $rc "power_clock.log, power_clock.json"
  [ $rc -eq 0 ] && python3 tools/power_clock_probe.py --report "$OUT/power_clock.json" || tail -n 20 "$OUT/power_clock.log"
fi

# 8. Sweeps, when asked for: every compiled config of one shape's M values, timed in one run
# (`python -m mixgemm sweep`); the summary lines say where auto's pick stands.
if [ -n "${SWEEP_CELLS:-}" ]; then
  for cell in $SWEEP_CELLS; do
    parse_cell sweep "$cell" || continue
    dir="$OUT/sweep_${shape}_m${ms//,/_}"
    python3 -m mixgemm sweep --shape "$shape" --m "$ms" --layout "${SWEEP_LAYOUT:-all}" --rounds "${SWEEP_ROUNDS:-3}" \
      ${SWEEP_EXTRA:-} --no-plots --out "$dir" >"$dir.log" 2>&1
    record "sweep $cell" $? "$(basename "$dir")/sweep.json"
  done
  sweeps=("$OUT"/sweep_*/sweep.json)
  [ -e "${sweeps[0]}" ] && python3 tools/sweep_summary.py "${sweeps[@]}" | tee "$OUT/sweep_summary.txt"
fi

# 9. The peers harness, when asked for: mixgemm beside the peers on each "KxN:M,M" cell of PEERS, in the same run
# (the standing record's grid and TP tables come from such runs). The harness exits 0 whatever its peers did, so a
# cell passes only where its JSON has a passing mixgemm[zp] row at every M asked for.
if [ -n "${PEERS:-}" ]; then
  for cell in $PEERS; do
    parse_cell peers "$cell" || continue
    dir="$OUT/peers_${shape}_m${ms//,/_}"
    PEERS_ARGS="--ms $ms --rounds ${PEERS_ROUNDS:-3} ${PEERS_EXTRA:-}" \
      bash "${PEERS_DIR:-.peers}/run_peers.sh" "$dir" "$shape" >"$dir.log" 2>&1
    python3 - "$dir/peers_$shape.json" "$ms" <<'PY' >>"$dir.log" 2>&1
import json, sys
rows = json.load(open(sys.argv[1]))["results"]
ok = {r["M"] for r in rows if r["peer"] == "mixgemm[zp]" and r["ok"]}
missing = [m for m in map(int, sys.argv[2].split(",")) if m not in ok]
sys.exit(f"no passing mixgemm[zp] row at M = {missing}" if missing else 0)
PY
    record "peers $cell" $? "$(basename "$dir")/peers_$shape.json"
    grep -E "^=== K=|^ +M |^ +[0-9]+ " "$dir/peers_table.txt" 2>/dev/null
  done
fi

gpu=$(head -n 1 "$OUT/gpu.txt")
if [ -n "${PACK:-}" ]; then
  # The originals go, so that results.tgz is among the files the device tool brings back. The archive is written
  # outside $OUT first: tar fails ("file changed as we read it") on a folder that gains a file while it reads it.
  tgz=$(mktemp --suffix=.tgz)
  ( cd "$OUT" && tar czf "$tgz" --exclude='extension.so.xz.part-*' . \
    && find . -mindepth 1 -maxdepth 1 ! -name 'extension.so.xz.part-*' -exec rm -rf {} + && mv "$tgz" results.tgz \
    && chmod 644 results.tgz )  # mktemp made it 0600
  record pack $? "results.tgz"
fi

echo
echo "==== mixgemm gpu_check summary ($gpu) ===="
printf '%s\n' "${SUMMARY[@]}"
exit $status
