#!/usr/bin/env bash
# One pass over everything GPU-side for the named exercises, logging under $OUT (or ./gpu-logs):
# grade the solutions (cold and warm) and the stubs, run the tests, time the references, and time
# one edit. SWEEP=1 first runs scripts/sweep_elementwise.py.
#   scripts/gpu_check.sh "01 02"
set -uo pipefail
cd "$(dirname "$0")/.."
EXS=${1:-}
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
log() { echo "== $* ($(date +%T))"; }
elapsed() { python3 -c "import sys, time; print(f'{time.time() - float(sys.argv[1]):.1f}')" "$1"; }
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"
if [ -n "${SWEEP:-}" ]; then log "elementwise sweep"; python3 scripts/sweep_elementwise.py 2>&1 | tee "$OUT/sweep.log" | tail -18; fi
log "grade solutions"; s=$(date +%s)
make grade TARGET=solutions EX="$EXS" SEED=1 2>&1 | tee "$OUT/grade_solutions.log"
echo "grade solutions (cold): $(( $(date +%s) - s )) s" | tee -a "$OUT/times.txt"
s=$(date +%s)
make grade TARGET=solutions EX="$EXS" SEED=2 > "$OUT/grade_solutions_warm.log" 2>&1
echo "grade solutions (warm): $(( $(date +%s) - s )) s" | tee -a "$OUT/times.txt"
log "grade stubs"; make grade EX="$EXS" 2>&1 | tee "$OUT/grade_stubs.log" | tail -40
log "edit one file and re-grade"
rm -rf /tmp/edit && mkdir -p /tmp/edit && first=${EXS%% *}
cp -r exercises/../solutions/"$(ls solutions | grep "^$first")" /tmp/edit/
python3 -m grader --target /tmp/edit --ex "$first" > /dev/null 2>&1
f=$(ls /tmp/edit/*/*.cu | head -1); echo "// edited $(date +%s%N)" >> "$f"
s=$(date +%s.%N); python3 -m grader --target /tmp/edit --ex "$first" > "$OUT/edit.log" 2>&1
echo "edit -> graded (full grading of $first): $(elapsed "$s") s" | tee -a "$OUT/times.txt"
echo "// edited again $(date +%s%N)" >> "$f"
s=$(date +%s.%N); python3 -m grader --target /tmp/edit --ex "$first" --quick > "$OUT/edit_quick.log" 2>&1
echo "edit -> graded (--quick: no slow checks, no timing): $(elapsed "$s") s" | tee -a "$OUT/times.txt"
log "make test"; s=$(date +%s)
make test EX="$EXS" PYTEST_ARGS="-q -ra" 2>&1 | tee "$OUT/test.log" | tail -30
echo "make test: $(( $(date +%s) - s )) s" | tee -a "$OUT/times.txt"
log "make bench"; make bench EX="$EXS" 2>&1 | tee "$OUT/bench.log" | tail -25
cp bench-report/* "$OUT/" 2>/dev/null
cat "$OUT/times.txt"
