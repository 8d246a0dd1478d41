# The course's commands. Each sets up its own environment (scripts/bootstrap.sh) on first use.
#
#   make grade                      grade your exercises/ (EX=01 for one, EX="04 09 10" or EX=04,09,10 for
#                                   several, SEED=n to replay inputs,
#                                   QUICK=1 for the fast edit loop without slow checks and timing,
#                                   SANITIZE=1 to run the correctness checks under compute-sanitizer,
#                                   RACECHECK=1 to run every op's small calls (forward and backward) and the
#                                   racecheck cases under compute-sanitizer racecheck (shared-memory races
#                                   between threads: a missing __syncthreads; no timing; minutes, not seconds),
#                                   VERBOSE=1 for every kernel's resource report and the compiler's warnings,
#                                   PARALLEL=n to grade n exercises' checks at once, default: the cores
#                                   less 2, at most 16, one per 7.5 GiB of free GPU memory, the ones left
#                                   over sharing the largest exercises' checks; 1 for one after another; a
#                                   timing always runs alone;
#                                   STRICT=1: a check this GPU cannot run, for lack of memory, costs points)
#   make grade TARGET=solutions     grade the reference solutions
#   make grade SUBMISSIONS=dir      grade a class: one folder per student, into the gradebook dir.gradebook/
#                                   beside it (GRADEBOOK=other to choose; FORCE=1 regrades every student;
#                                   one worker per visible GPU, WORKERS=n to choose)
#   make grade SUBMISSIONS=dir SLURM=1   the same as a Slurm job array (SLURM_TASKS, SLURM_PARTITION,
#                                   SLURM_TIME minutes per task, SLURM_GPUS per task, SLURM_ACCOUNT;
#                                   SLURM_DRY_RUN=1 prints the job script)
#   make test                       the repository's own tests (GPU tests skip without a GPU; EX= narrows,
#                                   TESTS=tests/test_classroom.py runs one file); prints the 30 slowest
#                                   tests and every skip's reason. Without a GPU it builds for one
#                                   architecture, 9.0a (TORCH_CUDA_ARCH_LIST="7.5;9.0a" asks for others;
#                                   on a GPU, the GPU's own) and runs the test files side by side, one
#                                   worker a core (pytest-xdist; TEST_WORKERS=n, 1 for one process);
#                                   every architecture is `make archs`'
#   make archs                      compile every solution's and stub's kernels (.cu) for each of the 8 GPU
#                                   architectures the course supports (7.5 8.0 8.6 8.9 9.0 9.0a 10.0 12.0),
#                                   no GPU needed; a table of compiled / the compiler's error. EX= narrows,
#                                   TARGET= checks one tree (default: solutions and exercises). ~5 min on 2 cores
#   make bench                      time every reference kernel beside PyTorch and the hardware limit
#                                   (PUBLISH=1: into docs/results/<gpu>/ and the README's table)
#   make mutants                    measure the grader: mutants of solutions/ (one change each: an operator, a
#                                   constant, a threshold, a removed check, __syncthreads or early return, ...)
#                                   graded, each stopping at its first failed check; the kill rate per exercise
#                                   and the survivors, into mutants-report/ (EX= some exercises, N=300 mutants
#                                   sampled, SEED=1 which ones, BUDGET=seconds: no round starts past it; a
#                                   later run keeps what an earlier one graded with the same grader;
#                                   SAME_CODE=1: no GPU, no grading: which of the report's unlisted survivors
#                                   compile to the solution's own machine code, as equivalents-file lines)
#   make exercises                  regenerate exercises/ and the student notebooks from solutions/
#                                   (FORCE=1 to overwrite edits in exercises/; EX= for some exercises only;
#                                   LEVEL=steps, the default: each region with its steps; LEVEL=goal: each
#                                   region states only its goal and size, its steps go to the README's
#                                   collapsed Hints; LEVEL=open: whole kernels and functions, each with its
#                                   goal and size; HINTS= is another name for LEVEL=; without LEVEL each
#                                   exercise keeps its level; notebooks: steps. It prints the student's and
#                                   the given code lines per exercise and level (docs/authoring.md).
#                                   Switching a level rewrites exercises/, so it needs FORCE=1 whenever
#                                   exercises/ differs from git's, as after an earlier switch)
#   make notebooks                  the notebooks from notebooks/source/<unit>.py (jupytext), and their
#                                   nbgrader student release, notebooks/release/ (committed);
#                                   COURSE_REPO=https://github.com/OWNER/NAME: the repository the Colab
#                                   badges and the setup cell's clone point at (kept in pyproject.toml)
#   make clean                      remove builds and reports

TARGET ?= exercises
EX ?=
SEED ?=
K ?=
SUBMISSIONS ?=
QUICK ?=
SANITIZE ?=
RACECHECK ?=
STRICT ?=
VERBOSE ?=
PARALLEL ?=
PUBLISH ?=
FORCE ?=
HINTS ?=
LEVEL ?=
PYTEST_ARGS ?=
TESTS ?= tests
WORKERS ?=
GRADEBOOK ?=
SLURM ?=
SLURM_TASKS ?=
SLURM_PARTITION ?=
SLURM_TIME ?=
SLURM_GPUS ?=
SLURM_ACCOUNT ?=
SLURM_DRY_RUN ?=
COURSE_REPO ?=
N ?=
BUDGET ?=

# EX=04,09,10 or EX="04 09 10": the same list for every target
comma := ,
EXS = $(strip $(subst $(comma), ,$(EX)))

export CUDA_HOME ?= $(if $(wildcard /usr/local/cuda/bin/nvcc),/usr/local/cuda,)
PY = py=$$(scripts/bootstrap.sh) || exit 1;

GRADE_ARGS = $(if $(EXS),--ex $(EXS)) $(if $(SEED),--seed $(SEED)) $(if $(K),-k "$(K)") $(if $(STRICT),--strict)
CLASS_ARGS = $(if $(WORKERS),--workers $(WORKERS)) $(if $(GRADEBOOK),--out "$(GRADEBOOK)") $(if $(FORCE),--force) \
  $(if $(SLURM),--slurm) $(if $(SLURM_TASKS),--tasks $(SLURM_TASKS)) \
  $(if $(SLURM_PARTITION),--partition $(SLURM_PARTITION)) $(if $(SLURM_TIME),--time-min $(SLURM_TIME)) \
  $(if $(SLURM_GPUS),--gpus-per-task $(SLURM_GPUS)) $(if $(SLURM_ACCOUNT),--account $(SLURM_ACCOUNT)) \
  $(if $(SLURM_DRY_RUN),--dry-run)

.PHONY: grade test archs bench mutants exercises notebooks clean

grade:
	@$(PY) if [ -n "$(SUBMISSIONS)" ]; then \
	  $$py -m grader.classroom.grade "$(SUBMISSIONS)" $(GRADE_ARGS) $(CLASS_ARGS); \
	else \
	  $$py -m grader --target "$(TARGET)" $(GRADE_ARGS) $(if $(QUICK),--quick) $(if $(SANITIZE),--sanitize) $(if $(RACECHECK),--racecheck) \
	    $(if $(VERBOSE),--verbose) \
	    $(if $(PARALLEL),--parallel $(PARALLEL)); \
	fi

# One architecture where there is no GPU to ask (make grade's default there is two, a T4's and
# Hopper's: twice the nvcc time of every build); TORCH_CUDA_ARCH_LIST given is kept. The 30 slowest
# tests and every skip's reason (-ra) are printed. pytest exits 5 when it collected no test: that
# must fail, not pass silently.
TEST_ARCH = 9.0a
TEST_REPORT = -ra --durations=30
# Without a GPU the test files run side by side, one pytest-xdist worker a core (at most 8), each
# file whole on one worker (its module fixtures built once); on a GPU one after another (the GPU
# tests time kernels). TEST_WORKERS=n chooses either way; 1: one process.
TEST_WORKERS ?=
test:
	@$(PY) n="$(TEST_WORKERS)"; \
	if ! $$py -c 'import sys; from grader import env; sys.exit(0 if env.gpu_present() else 1)'; then \
	  if [ -z "$${TORCH_CUDA_ARCH_LIST:-}" ]; then export TORCH_CUDA_ARCH_LIST="$(TEST_ARCH)"; \
	    echo "make test: building for $(TEST_ARCH) (no GPU here)"; fi; \
	  [ -n "$$n" ] || n=$$(( $$(nproc) < 8 ? $$(nproc) : 8 )); \
	fi; \
	workers=""; if [ "$${n:-1}" -gt 1 ]; then \
	  if $$py -c 'import xdist' 2>/dev/null; then workers="-n $$n --dist loadfile"; \
	    echo "make test: $$n workers (pytest-xdist), each test file whole on one"; \
	  else echo "make test: one process (pytest-xdist is not installed: pip install pytest-xdist)"; fi; \
	fi; \
	EX="$(EX)" $$py -m pytest $(TESTS) $$workers $(TEST_REPORT) $(PYTEST_ARGS); rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "make test: no tests were collected" >&2; exit 1; fi; exit $$rc

# TARGET only when given (its default, exercises, is make grade's): both trees otherwise
archs:
	@$(PY) $$py -m grader.run.archs $(if $(EXS),--ex $(EXS)) $(if $(filter-out file,$(origin TARGET)),--target $(TARGET))

bench:
	@$(PY) $$py -m grader.bench.benchmarks $(if $(EXS),--ex $(EXS)) $(if $(PUBLISH),--publish)

mutants:
	@$(PY) $$py -m grader.run.mutants $(if $(EX),--ex $(EX)) $(if $(N),--n $(N)) $(if $(SEED),--seed $(SEED)) \
	  $(if $(BUDGET),--budget $(BUDGET)) $(if $(SAME_CODE),--same-code) $(if $(MUTANTS_OUT),--out $(MUTANTS_OUT))

# the student copies and the student notebooks both hold the solutions' regions (their TODO lines):
# regenerate both
exercises:
	@$(PY) $$py -m grader.authoring.stubs $(if $(FORCE),--force) $(if $(or $(LEVEL),$(HINTS)),--level $(or $(LEVEL),$(HINTS))) $(if $(EXS),--ex $(EXS)) && \
	  $$py -m grader.authoring.notebook_release release $(if $(COURSE_REPO),--repo "$(COURSE_REPO)")

notebooks:
	@$(PY) $$py -m grader.authoring.notebook_release release $(if $(COURSE_REPO),--repo "$(COURSE_REPO)")

# notebooks/release/ is tracked; the instructor's notebooks, notebooks/source/<unit>/, are generated
clean:
	rm -rf .build grade-report bench-report mutants-report notebooks/source/*/ notebooks/gradebook.db
