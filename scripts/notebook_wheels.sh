#!/usr/bin/env bash
# Download into .whl/ the wheels that nbgrader's notebooks need on a GPU machine without internet
# whose Python (3.12, x86_64) already has torch, numpy, matplotlib, jinja2, pyyaml, requests, psutil,
# pygments, attrs, packaging, python-dateutil, typing-extensions, anyio, prometheus-client, cloudpickle
# and setuptools (the lent machine's image). scripts/gpu_check.sh installs them there with
#   python3 -m pip install --no-index --no-deps --target /tmp/site .whl/*.whl
#
# The set is what `python -m nbgrader generate_assignment / autograde / generate_feedback`, an ipykernel
# kernel and submitit import, checked by doing all three with a Python 3.12 that has only the packages
# above. nbgrader's own requirements jupyterlab, jupyterlab-server, notebook and ipywidgets (its web
# extensions) are left out: the command line never imports them; jupyter-server is in, because nbgrader
# imports its handlers at import time, but not its server-only requirements. One version of each.
#
#   scripts/notebook_wheels.sh            (about 35 MB; .whl/ is ignored by git: carry it to the machine)
set -euo pipefail
cd "$(dirname "$0")/.."
PACKAGES=(
  nbgrader==0.9.6 nbformat==5.11.1 nbclient==0.11.0 nbconvert==7.17.2 ipykernel==7.4.0
  jupyter_client==8.10.0 jupyter_core==5.9.1 jupyter_server==2.21.1 traitlets==5.16.1 submitit==1.5.4
  # jupytext (a unit's notebook from notebooks/source/<unit>.py): its declared requirements, pyyaml being in
  # the image; not yet tried on that machine
  jupytext==1.19.6 markdown_it_py==4.3.0 mdit_py_plugins==0.7.0 mdurl==0.1.2
  # nbgrader: the gradebook and its migrations, fuzzy matching
  alembic==1.20.1 mako==1.4.3 sqlalchemy==2.1.9 rapidfuzz==3.14.6
  # nbformat, nbconvert
  jsonschema==4.26.0 jsonschema_specifications==2025.9.1 referencing==0.37.0 rpds_py==2026.9.1
  fastjsonschema==2.22.3 mistune==3.4.0 bleach==6.4.0 webencodings==0.6.1 tinycss2==1.5.1 defusedxml==0.7.1
  pandocfilters==1.5.1 beautifulsoup4==4.15.0 soupsieve==4.1.3 jupyterlab_pygments==0.3.0 platformdirs==4.14.8
  # jupyter_client, ipykernel, IPython
  pyzmq==27.3.0 tornado==6.6.1 comm==0.2.3 debugpy==1.8.22 nest_asyncio2==1.7.4 matplotlib_inline==0.2.2
  ipython==9.18.1 ipython_pygments_lexers==1.1.1 jedi==0.20.1 parso==0.8.7 prompt_toolkit==3.0.53 wcwidth==0.9.4
  pexpect==4.9.0 ptyprocess==0.7.0 stack_data==0.6.3 executing==2.3.0 asttokens==3.0.2 pure_eval==0.2.4
)
mkdir -p .whl
for package in "${PACKAGES[@]}"; do
  out=$(python3 -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 --platform manylinux1_x86_64 -d .whl "$package" 2>&1) ||
    { echo "$out" | grep -v "is ignored" >&2; echo "notebook_wheels: could not download $package" >&2; exit 1; }
done
echo "$(ls .whl/*.whl | wc -l) wheels, $(du -sh .whl | cut -f1), in .whl/"
