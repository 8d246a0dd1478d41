#!/usr/bin/env bash
# Everything GPU-side in one pass, for a machine held for a limited time. Logs go under $OUT
# (default ./gpu-logs) as they are written, and into $OUT/logs.tgz on exit, so a pass cut short
# still tells what it reached.
#
#   scripts/gpu_check.sh                       every stage, every exercise
#   STAGES="grade test" scripts/gpu_check.sh   some stages: sweep grade serial stubs goalstubs edit test bench notebooks
#                                              classroom classtime multigpu ballast ptx fp64 oldgrader tune5 tune3 models
#                                              mutants openstubs paths knownwrong timerorder
#   N=300 SEED=1 STAGES=mutants ...            the mutants stage: N mutants of EXS (default all) sampled with SEED,
#                                              graded until the stage's time is spent; report in $OUT/mutants-report/
#                                              (MUTANTS_OUT=tests/mutants/report: continue the tracked sample there)
#   EXS="01 02" scripts/gpu_check.sh           some exercises (grade, stubs, bench)
#   TEST_FILES="tests/test_classroom.py" ...   the test stage runs these files (default: all)
#   TEST_K=timed ...                           and only their tests matching this -k expression
#   KNOWN_WRONG='03_.*/pytorch' ...             the known-wrong tests grade only these variants (regex over ids; "new": the
#                                              trust rework's)
#   STAGES=knownwrong KW_PATTERN='^0[67]_' ...  the known-wrong suite alone, in one pytest run (KW_ROUND=N: rounds of N,
#                                              each its own run); each variant is entered in the ledger as its grade
#                                              arrives: a pass cut short loses only the gradings under way;
#                                              KW_STALE=1: only the variants the ledger holds no current grade of
#                                              (tests/known_wrong/ledger.py; the updated ledger: $OUT/graded.json)
#   BUDGET=540 scripts/gpu_check.sh            seconds for the whole pass; each stage gets what is left
#   NB_UNITS="unit1 unit2" ...                 the notebooks stage autogrades only these units
#   TUNE_CONFIGS=A,C ...                       the tune5 / tune3 stages try only these configurations
#
# Opt-in stages (the test stage runs their tests too): notebooks, nbgrader autograde of every unit's
# solution notebook (full marks) and release (zero), after building in parallel everything the notebooks
# will build (tests/test_notebooks.py -m gpu); classroom, a class graded end to end
# (tests/test_classroom.py). They need nbgrader and Jupyter, which a bare GPU machine lacks: carry their
# wheels in .whl/ (scripts/notebook_wheels.sh downloads them); they are installed into /tmp/site. The
# feedback pages the tests produce are kept under the logs, in artifacts/. models: ResNet-50 and MobileNetV2
# built from the course's modules (08, 09, 10) against PyTorch's, errors and training-step times
# (scripts/course_models.py; tests/test_course_models.py, which the test stage runs, checks the same).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"; L=${LOGS:-$OUT/logs}; mkdir -p "$L"  # LOGS=/tmp/x: only the .tgz in $OUT
STAGES=${STAGES-"grade serial stubs edit test bench"}
EXS=${EXS:-}
TEST_FILES=${TEST_FILES:-$(ls tests/test_*.py)}
BUDGET=${BUDGET:-3600}
export PYTHONUNBUFFERED=1
T="$OUT/times.txt"; start=$(date +%s)
trap 'tar czf "$OUT/logs.tgz" -C "$(dirname "$L")" "$(basename "$L")" 2>/dev/null' EXIT
left() { echo $(( BUDGET - ($(date +%s) - start) )); }
want() { [[ " $STAGES " == *" $1 "* ]]; }
since() { python3 -c "import sys, time; print(f'{time.time() - float(sys.argv[1]):.1f}')" "$1"; }
# run LABEL SECONDS COMMAND...: under a time limit (SIGINT first, so pytest prints its summary)
run() {
  local label=$1 limit=$2; shift 2
  if [ "$limit" -le 5 ]; then echo "$label: skipped, no time left" | tee -a "$T"; return; fi
  local s; s=$(date +%s.%N)
  timeout -s INT -k 10 "$limit" "$@" > "$L/$label.log" 2>&1
  echo "$label: rc=$? $(since "$s") s" | tee -a "$T"
}

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee -a "$T"
python3 -c "import torch; print('torch', torch.__version__, 'CUDA', torch.version.cuda, 'cuDNN', torch.backends.cudnn.version())" | tee -a "$T"

notebook_packages() {  # nbgrader, Jupyter and submitit from the carried wheels, unless already importable
  if ! python3 -c "import nbgrader, nbclient, ipykernel, submitit" 2>/dev/null && ls .whl/*.whl >/dev/null 2>&1; then
    local s; s=$(date +%s.%N)
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
      > "$L/notebook_packages.log" 2>&1
    echo "notebook packages: installed from .whl/ in $(since "$s") s" | tee -a "$T"
  fi
  if [ -d /tmp/site ]; then  # scripts (alembic, which nbgrader runs) and nbconvert's templates live here too
    export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH} PATH=/tmp/site/bin:$PATH
    export JUPYTER_PATH=/tmp/site/share/jupyter${JUPYTER_PATH:+:$JUPYTER_PATH}
  fi
  python3 -c "import nbgrader, nbclient, ipykernel, submitit as s; print('nbgrader', nbgrader.__version__,
    'nbclient', nbclient.__version__, 'ipykernel', ipykernel.__version__, 'submitit', s.__version__)" 2>&1 | tail -1 | tee -a "$T"
  export COURSE_TEST_ARTIFACTS="$L/artifacts"
}
if want notebooks || want classroom || want test; then
  notebook_packages
fi
want sweep && run sweep "$(left)" python3 scripts/sweep_elementwise.py
if want grade; then
  run grade_solutions_cold "$(left)" make grade TARGET=solutions EX="$EXS" SEED=1
  cp grade-report/report.json "$OUT/report_solutions_cold.json" 2>/dev/null
  grep -A30 "^exercise" "$L/grade_solutions_cold.log" | head -24
  [ -n "${GRADE_COLD_ONLY:-}" ] || run grade_solutions_warm "$(left)" make grade TARGET=solutions EX="$EXS" SEED=2
  cp grade-report/report.json grade-report/parallel.json 2>/dev/null
  cp grade-report/report.json "$OUT/report_solutions_warm.json" 2>/dev/null
  grep -A30 "^exercise" "$L/grade_solutions_warm.log" | head -40
  grep "graded " "$L/grade_solutions_warm.log"
fi
# the timed call's preparation orders against the op's kernel time (grader.verify.timer; about a minute,
# after the grade, whose builds it reuses)
want timerorder && run timerorder "$(left)" env PYTHONPATH=. python3 scripts/timer_order_probe.py $EXS
if want serial; then
  # the same warm grade one exercise after another: its time, and the speeds beside the parallel run's
  run grade_solutions_serial "$(left)" make grade TARGET=solutions EX="$EXS" SEED=2 PARALLEL=1
  cp grade-report/report.json grade-report/serial.json 2>/dev/null
  [ -f grade-report/parallel.json ] && python3 scripts/compare_grades.py grade-report/parallel.json grade-report/serial.json
fi
if want stubs; then
  run grade_stubs "$(left)" make grade EX="$EXS"
  grep -A50 "^exercise" "$L/grade_stubs.log" | grep -v "^      " | head -30
fi

# level_stubs LEVEL: the stubs at a hint level (make exercises LEVEL=...), generated into a scratch
# folder beside the tracked tree: zero points there too, each exercise with its reason
level_stubs() {
  local tree=.build/level-$1-gpu/exercises
  python3 -c "import sys; from pathlib import Path; from grader.authoring import stubs; stubs.generate(stubs.SOLUTIONS, Path(sys.argv[1]), sys.argv[2])" "$tree" "$1"
  run "grade_$1_stubs" "$(left)" make grade TARGET="$tree" EX="$EXS"
  grep -A50 "^exercise" "$L/grade_$1_stubs.log" | grep -v "^      " | head -30
}
want openstubs && level_stubs open
if want paths; then
  # the planner paths the solutions' full grade reaches (Spec.paths; tests/test_gpu_grading.py fails on one unreached)
  run paths "$(left)" make test TESTS=tests/test_gpu_grading.py PYTEST_ARGS="-q -s -k declared_paths"
  grep -E "declared paths reached|passed|failed" "$L/paths.log" | head -14
fi
want goalstubs && level_stubs goal
if want edit; then
  # the loop a student lives in: one exercise built, then one file edited and re-graded
  rm -rf /tmp/edit && mkdir -p /tmp/edit && cp -r solutions/01_leaky_relu /tmp/edit/
  run edit_first_build "$(left)" python3 -m grader --target /tmp/edit --ex 01 --quick --out /tmp/edit/report
  echo "// edited" >> /tmp/edit/01_leaky_relu/leaky_relu.cu
  run edit_then_grade "$(left)" python3 -m grader --target /tmp/edit --ex 01 --out /tmp/edit/report
  for i in 1 2 3; do
    echo "// edited again $i" >> /tmp/edit/01_leaky_relu/leaky_relu.cu
    run "edit_then_grade_quick_$i" "$(left)" python3 -m grader --target /tmp/edit --ex 01 --quick --out /tmp/edit/report
  done
  cp /tmp/edit/report/report.json "$L/edit_quick_report.json" 2>/dev/null
  # where the quick grade's time goes: its grading process alone, every test's duration, every import
  run edit_profile "$(left)" python3 -X importtime -m pytest grader/run/suite -q -p no:cacheprovider --rootdir=. \
    --exercise-dir=/tmp/edit/01_leaky_relu --seed=1 -m "not slow" --durations=0
  # the same under cProfile: which calls the first check's seconds of one-time set-up go to
  run edit_cprofile "$(left)" python3 -m cProfile -o "$L/edit_quick.prof" -m pytest grader/run/suite -q \
    -p no:cacheprovider --rootdir=. --exercise-dir=/tmp/edit/01_leaky_relu --seed=1 -m "not slow"
  python3 -c "import pstats, sys; pstats.Stats(sys.argv[1]).sort_stats('cumulative').print_stats(40)" \
    "$L/edit_quick.prof" > "$L/edit_cprofile_top.txt" 2>&1
fi
if want test; then
  for f in $TEST_FILES; do
    run "test_$(basename "$f" .py)" "$(( $(left) - 60 ))" make test TESTS="$f" \
      PYTEST_ARGS="-v -ra --durations=10${TEST_K:+ -k '$TEST_K'}"
    tail -3 "$L/test_$(basename "$f" .py).log"
  done
fi
if want notebooks; then
  # NB_UNITS="unit1 unit2": only those units (prepared and autograded)
  units=$(echo "${NB_UNITS:-}" | sed 's/ \+/ or /g')
  run notebooks "$(left)" make test TESTS=tests/test_notebooks.py \
    PYTEST_ARGS="-m gpu -q -s -ra --durations=10${units:+ -k '$units'}"
  grep -E "prebuilt|autograde of two|passed|failed|Error" "$L/notebooks.log" 2>/dev/null | tail -15
fi
if want classroom; then
  run classroom "$(left)" make test TESTS=tests/test_classroom.py PYTEST_ARGS="-q -ra --durations=10"
  tail -5 "$L/classroom.log" 2>/dev/null
fi
if want classtime; then
  # a class at scale: CLASS_STUDENTS students (tests.known_wrong.make_class: solutions, stubs, known-wrong
  # variants) graded cold; again unchanged (nothing regraded); again after one student's edit (that one only)
  # (CLASS_KEEP=1: a class already made by a call cut short is kept, and its grading resumes)
  cls=/tmp/class; cex=${CLASS_EX:-01 03 05 08}
  if [ -z "${CLASS_KEEP:-}" ] || [ ! -d "$cls" ]; then
    rm -rf "$cls" "$cls.gradebook"
    python3 -m tests.known_wrong.make_class "$cls" --students "${CLASS_STUDENTS:-24}" --ex $cex
  fi
  run class_grade "$(left)" make grade SUBMISSIONS="$cls" EX="$cex"
  tail -8 "$L/class_grade.log"
  run class_grade_unchanged "$(left)" make grade SUBMISSIONS="$cls" EX="$cex"
  tail -4 "$L/class_grade_unchanged.log"
  edited=$(ls -d "$cls"/student001/exercises/*/ | head -1); f=$(ls "$edited"*.cu | head -1)
  echo "// edited" >> "$f"
  run class_grade_one_edit "$(left)" make grade SUBMISSIONS="$cls" EX="$cex"
  tail -6 "$L/class_grade_one_edit.log"
  cp "$cls.gradebook/gradebook.csv" "$cls.gradebook/gradebook.json" "$L/" 2>/dev/null
  # a second class beside it, with the same student names: its own gradebook; into the first's, refused
  cls2=/tmp/class2; rm -rf "$cls2" "$cls2.gradebook"; before=$(md5sum < "$cls.gradebook/gradebook.json")
  python3 -m tests.known_wrong.make_class "$cls2" --students 2 --ex $cex
  run class2_beside "$(left)" make grade SUBMISSIONS="$cls2" EX="$cex"
  run class2_into_the_first "$(left)" make grade SUBMISSIONS="$cls2" EX="$cex" GRADEBOOK="$cls.gradebook"
  tail -3 "$L/class2_into_the_first.log"
  [ "$(md5sum < "$cls.gradebook/gradebook.json")" = "$before" ] && echo "first class's gradebook unchanged" | tee -a "$T"
  # the same students graded one exercise at a time, alone (PARALLEL=1): the same outcomes
  serial=/tmp/class_serial; rm -rf "$serial" "$serial.gradebook"; mkdir -p "$serial"
  for s in $(ls "$cls" | head -"${SERIAL_STUDENTS:-4}"); do cp -r "$cls/$s" "$serial/"; done
  seed=$(python3 -c "import json, sys; print(json.load(open(sys.argv[1]))['seed'])" "$cls.gradebook/gradebook.json")
  run class_serial "$(left)" make grade SUBMISSIONS="$serial" EX="$cex" PARALLEL=1 SEED="$seed"
  python3 scripts/same_outcomes.py "$cls.gradebook/gradebook.json" "$serial.gradebook/gradebook.json" | tee -a "$T"
fi
if want multigpu; then
  # a class on every visible GPU (one worker each) against one GPU, the builds cached for both timings:
  # the speed-up, and the same outcomes. MULTI_PART="1": cold on all GPUs, then again (cached) into a
  # second gradebook; "2": on GPU 0 alone (cached) into a third, and the three compared. A held machine
  # keeps /tmp between calls, so the parts may be two calls.
  cls=/tmp/class; cex=${CLASS_EX:-01 03 05 08}; part=" ${MULTI_PART:-1 2} "
  if [[ "$part" == *" 1 "* ]]; then
    rm -rf "$cls" "$cls.gradebook" /tmp/class_all.gradebook /tmp/class_one.gradebook
    python3 -m tests.known_wrong.make_class "$cls" --students "${CLASS_STUDENTS:-24}" --ex $cex
    run class_all_gpus_cold "$(left)" make grade SUBMISSIONS="$cls" EX="$cex"
    grep -E "built in|per worker-hour|grading with" "$L/class_all_gpus_cold.log" | tee -a "$T"
    seed=$(python3 -c "import json, sys; print(json.load(open(sys.argv[1]))['seed'])" "$cls.gradebook/gradebook.json")
    run class_all_gpus_cached "$(left)" make grade SUBMISSIONS="$cls" EX="$cex" GRADEBOOK=/tmp/class_all.gradebook SEED="$seed"
    grep -E "built in|per worker-hour|grading with" "$L/class_all_gpus_cached.log" | tee -a "$T"
  fi
  if [[ "$part" == *" 2 "* ]]; then
    seed=$(python3 -c "import json, sys; print(json.load(open(sys.argv[1]))['seed'])" "$cls.gradebook/gradebook.json")
    CUDA_VISIBLE_DEVICES=0 run class_one_gpu_cached "$(left)" make grade SUBMISSIONS="$cls" EX="$cex" \
      GRADEBOOK=/tmp/class_one.gradebook SEED="$seed"
    grep -E "built in|per worker-hour|grading with" "$L/class_one_gpu_cached.log" | tee -a "$T"
    for b in /tmp/class_all.gradebook /tmp/class_one.gradebook; do
      [ -f "$b/gradebook.json" ] && python3 scripts/same_outcomes.py "$cls.gradebook/gradebook.json" "$b/gradebook.json" | tee -a "$T"
    done
  fi
  for b in "$cls.gradebook" /tmp/class_all.gradebook /tmp/class_one.gradebook; do
    [ -f "$b/gradebook.json" ] && cp "$b/gradebook.json" "$L/$(basename "$b").json"
  done
fi
if want ballast; then
  # a smaller card, simulated: a second process holds all but N GiB while the reference is graded
  for free in ${BALLAST_FREE:-14.5 11 7.5}; do
    python3 scripts/ballast.py "$free" > "$L/ballast_$free.txt" 2>&1 & bp=$!
    sleep 8; cat "$L/ballast_$free.txt"
    # and the float64 references on the CPU, as on the consumer cards simulated (grader.verify.fp64)
    COURSE_REFERENCE_DEVICE=cpu run "grade_solutions_${free}GiB_free" "$(left)" make grade TARGET=solutions EX="$EXS" SEED=3
    kill $bp; wait $bp 2>/dev/null
    grep -E "^0|^10|^total|not run|out of memory|OutOfMemory" "$L/grade_solutions_${free}GiB_free.log" | head -20
  done
fi
if want ptx; then
  # older architectures' code paths, for real: compute_75 / compute_80 PTX JIT-compiled on this GPU
  for arch in 7.5 8.0; do
    TORCH_CUDA_ARCH_LIST="$arch+PTX" COURSE_BUILD_DIR="/tmp/build-$arch" \
      run "grade_solutions_ptx_$arch" "$(left)" make grade TARGET=solutions EX="$EXS" SEED=4
    grep -E "^0|^10|^total" "$L/grade_solutions_ptx_$arch.log" | head -12
  done
fi
if want fp64; then
  # the float64 work of a grade of the reference, counted per exercise (grader.verify.fp64)
  mkdir -p "$L/fp64"; fp64=$(cd "$L/fp64" && pwd)  # absolute: the grading processes run elsewhere
  # references on the CPU, as on a T4 (grader.verify.fp64.reference_device): what the estimate is for
  COURSE_REFERENCE_DEVICE=cpu COURSE_COUNT_FP64="$fp64/{exercise}.json" run grade_fp64_count "$(left)" make grade TARGET=solutions EX="$EXS" SEED=5
  python3 scripts/fp64_estimate.py "$fp64" | tee "$L/fp64_estimate.txt"
fi
if want tune5; then
  # 05's kernel 5 in several tile shapes, each beside cuBLAS at its precision (scripts/tune_matmul5.py)
  run tune5 "$(left)" python3 scripts/tune_matmul5.py --out /tmp/tune5 ${TUNE_CONFIGS:+--configs $TUNE_CONFIGS}
  cp /tmp/tune5/results.json "$L/tune5.json" 2>/dev/null
  tail -12 "$L/tune5.log"
fi
if want tune3; then
  # 06's version 3 with several register budgets and ring depths, beside cuDNN TF32 (scripts/tune_conv3.py)
  run tune3 "$(left)" python3 scripts/tune_conv3.py --out /tmp/tune3 ${TUNE_CONFIGS:+--configs $TUNE_CONFIGS}
  cp /tmp/tune3/results.json "$L/tune3.json" 2>/dev/null
  tail -40 "$L/tune3.log"
fi
if want oldgrader; then
  # the trust rework's known-wrong variants, graded by the grader before it (carried in old-grader/)
  run oldgrader "$(left)" python3 scripts/old_grader_on_variants.py old-grader --out /tmp/oldgrader ${OLD_ROUNDS:+--rounds "$OLD_ROUNDS"}
  cat "$L/oldgrader.log" | tail -40
fi
if want models; then
  run models "$(left)" python3 scripts/course_models.py
  grep -E "^[A-Z]|output|worst|PASS|FAIL|kernels|ms " "$L/models.log" | head -40
fi
if want mutants; then
  # the grader's kill rate (grader.run.mutants); it stops starting rounds 30 s before the stage's time is out
  mout=${MUTANTS_OUT:-mutants-report}  # tests/mutants/report: the tracked sample, continued
  run mutants "$(left)" make mutants EX="$EXS" N="${N:-300}" SEED="${SEED:-1}" BUDGET="$(( $(left) - 30 ))" \
    MUTANTS_OUT="$mout"
  rm -rf "$OUT/mutants-report"; cp -r "$mout" "$OUT/mutants-report" 2>/dev/null
  grep -E "^round|^budget|^  [0-9][0-9]_|^  wall" "$L/mutants.log"
  tail -16 "$L/mutants.log"
fi
if want knownwrong; then
  # the known-wrong suite (tests/test_gpu_grading.py): the variants matching KW_PATTERN in one pytest run with
  # the time left (each is entered in the ledger as its grade arrives, so a run cut short keeps what it
  # finished), or in rounds of KW_ROUND variants, each its own run
  size=${KW_ROUND:-100000}; i=0
  while read -r rx; do
    i=$((i + 1))
    if [ "$(left)" -lt 120 ]; then echo "knownwrong_$i: not started, $(left) s left" | tee -a "$T"; continue; fi
    KNOWN_WRONG="$rx" run "knownwrong_$i" "$(left)" python3 -m pytest tests/test_gpu_grading.py -k known_wrong -s \
      -q -rf -p no:cacheprovider
    grep -E "^FAILED|NOT as expected|[0-9]+ (passed|failed)" "$L/knownwrong_$i.log" | tail -12
    cp tests/known_wrong/graded.json "$OUT/" 2>/dev/null
  done < <(python3 -m tests.known_wrong ${KW_STALE:+stale} "${KW_PATTERN:-.}" "$size")
fi
if want bench; then
  run bench "$(left)" make bench EX="$EXS"
  cp bench-report/* "$OUT/" 2>/dev/null
  grep -E "^limits|^0|^10" "$L/bench.log" | head -40
fi
cat "$T"
