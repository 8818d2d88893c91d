#!/usr/bin/env bash
# Park the committed sweep records outside the checkout for a device call, and bring them back after it.
#
#   bash tools/park_sweep_records.sh out   # before the call
#   bash tools/park_sweep_records.sh in    # after it (always: until then git sees them as deleted)
#
# Why: a device call sends the working tree, at most 64 MiB with the carried paths. The sweep records
# (benchmarks/*-sweep-*.json, ~45 MB) are most of the tracked bytes, and no device command reads them; parked, a
# call can carry a prebuilt extension (~16 MB, gpu_check.sh's PREBUILT) and the peers harness (~26 MB) beside the
# rest. While they are parked, benchmarks/SWEEP_RECORDS_PARKED says so (it travels), and the two tests that read
# the records skip; a missing record without the marker fails them, and so does the marker beside the records.
# Until `in`, git sees the records as deleted: do not commit with -a or add -A while they are parked.
set -euo pipefail
cd "$(dirname "$0")/.."
PARK=${PARK_DIR:-../.parked-sweep-records}
MARKER=benchmarks/SWEEP_RECORDS_PARKED
case "${1:-}" in
  out)
    [ -e "$MARKER" ] && { echo "park: already parked (in $(cat "$MARKER"))" >&2; exit 1; }
    changed=$(git status --porcelain -- 'benchmarks/*-sweep-*.json')
    [ -n "$changed" ] && { echo "park: commit the sweep records first:" >&2; echo "$changed" >&2; exit 1; }
    mkdir -p "$PARK"
    [ -z "$(ls -A "$PARK")" ] || { echo "park: $PARK is not empty" >&2; exit 1; }
    mv benchmarks/*-sweep-*.json "$PARK"/
    (cd "$PARK" && pwd) >"$MARKER"
    echo "park: $(ls "$PARK" | wc -l) sweep records moved to $PARK; bring them back with: bash $0 in"
    ;;
  in)
    [ -e "$MARKER" ] || { echo "park: nothing parked" >&2; exit 1; }
    PARK=$(cat "$MARKER")
    for f in "$PARK"/*; do [ ! -e "benchmarks/$(basename "$f")" ] || { echo "park: benchmarks/$(basename "$f") exists" >&2; exit 1; }; done
    mv "$PARK"/* benchmarks/
    rm -f "$MARKER"
    rmdir "$PARK" 2>/dev/null || true
    echo "park: sweep records back; git status: $(git status --porcelain -- benchmarks | wc -l) changed paths under benchmarks/"
    ;;
  *) sed -n 2,5p "$0" >&2; exit 2 ;;
esac
