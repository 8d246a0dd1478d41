#!/usr/bin/env bash
# Print the Python interpreter that `make` should use, setting one up first if none is ready.
#
# An interpreter is ready when it has torch built with CUDA, ninja, pytest and numpy. We try, in
# order: $PYTHON, this repository's .venv, and python3 (a GPU machine with PyTorch preinstalled).
# If none is ready, we create .venv and install requirements.txt into it (torch with CUDA is several
# GB; a few minutes). Everything but the interpreter's path goes to stderr.
set -euo pipefail
cd "$(dirname "$0")/.."

# Found without importing torch (which takes seconds, on every `make grade`): each package's spec,
# and torch/version.py's `cuda` line, which is None in a CPU-only build.
ready='import importlib.util as u, os, re, sys
found = [u.find_spec(m) for m in ("torch", "ninja", "pytest", "numpy")]
if None in found: sys.exit(3)
text = open(os.path.join(found[0].submodule_search_locations[0], "version.py")).read()
sys.exit(0 if re.search(r"^cuda\b.*=\s*[\x27\x22]", text, re.M) else 3)'
for py in "${PYTHON:-}" .venv/bin/python python3; do
  if [ -n "$py" ] && command -v "$py" >/dev/null 2>&1 && "$py" -c "$ready" >/dev/null 2>&1; then
    echo "$py"
    exit 0
  fi
done

echo "bootstrap: no Python with torch (CUDA build), ninja, pytest and numpy; creating .venv" >&2
python3 -c 'import sys; sys.exit(0 if sys.version_info >= (3, 10) else 1)' ||
  { echo "bootstrap: Python 3.10 or newer is required" >&2; exit 1; }
python3 -m venv .venv >&2
start=$(date +%s)
# pip's index warnings about local mirrors are noise here; real errors still fail the install
.venv/bin/python -m pip install --quiet --upgrade pip >&2
.venv/bin/python -m pip install --quiet -r requirements.txt 2>&1 | grep -v "is ignored: it is neither" >&2 || true
if ! .venv/bin/python -c "$ready" >&2; then
  echo "bootstrap: installing requirements.txt into .venv failed" >&2
  exit 1
fi
echo "bootstrap: .venv ready in $(( $(date +%s) - start )) s" >&2
echo .venv/bin/python
