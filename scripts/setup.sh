#!/usr/bin/env bash
# Make .venv/ with everything mlpbench needs, on a fresh machine or a GPU box.
#
# A Python that already imports torch (a GPU box's CUDA build, say) is kept: the venv sees its
# site-packages and torch is not reinstalled. Elsewhere torch is pinned to 2.13.0, the CPU build
# whose torch.compile works here (2.14.1 fails inside Inductor; an unpinned torch pulls a CUDA
# build of several GB).
# It then writes each kernel repository's build/torch-universal/ (kernels_local/build.py --all), so that
# `kernels.get_local_kernel(Path("kernels_local/gelu_mul"))` loads it from the checkout.
# Usage: bash scripts/setup.sh            (PYTHON=python3.12 bash scripts/setup.sh to choose)
set -euo pipefail
cd "$(dirname "$0")/.."
py=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
    if "$py" -c "import torch" 2>/dev/null; then
        echo "setup: using the torch already in $py ($("$py" -c 'import torch; print(torch.__version__)'))"
        "$py" -m venv --system-site-packages .venv
    else
        "$py" -m venv .venv
    fi
fi
.venv/bin/python -m pip install -q --upgrade pip
if ! .venv/bin/python -c "import torch" 2>/dev/null; then
    echo "setup: installing torch==2.13.0 (CPU build)"
    .venv/bin/python -m pip install -q "torch==2.13.0"
fi
# Build with the setuptools already there when there is one (an offline box cannot fetch it).
isolation=()
.venv/bin/python -c "import setuptools" 2>/dev/null && isolation=(--no-build-isolation)
.venv/bin/python -m pip install -q "${isolation[@]}" -e ".[test,model]"
# A kernel repository's loadable variant (build/<variant>/, the layout kernels loads) is generated
# from its torch-ext/ and git-ignored; mlpbench itself loads a copy it keeps in a cache, but a user who
# passes the repository's path to kernels.get_local_kernel needs it here. After editing torch-ext/,
# run this again (`--check` tells whether it is due).
.venv/bin/python kernels_local/build.py --all
echo "setup: ready: $(.venv/bin/python -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__, "cuda" if torch.cuda.is_available() else "cpu")')"
