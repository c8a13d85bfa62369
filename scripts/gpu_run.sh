#!/usr/bin/env bash
# What a GPU box records for the repository, step by step:
#   tests  the kernel repository's tests and the harness's GPU tests
#   run    the standard tier through pytest-benchmark (`mlpbench run`), one op group at a time
#   asv    the standard tier through ASV for the last two commits, each from its own checkout,
#          on one GPU so that `asv compare` compares like with like (MLPBENCH_CASES narrows it)
#
# Usage: bash scripts/gpu_run.sh OUTDIR [STEP ...]     (default steps: tests run asv)
# Logs and result files are copied to OUTDIR. Expects a Python with CUDA torch and mlpbench's
# dependencies, and a git checkout (or a bundle at .asvrepo.bundle, unpacked here).
set -uo pipefail
out=${1:?usage: gpu_run.sh OUTDIR [tests] [run] [asv]}
shift
steps=${*:-tests run asv}
mkdir -p "$out"
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
export PYTHONUNBUFFERED=1

if ! git rev-parse -q HEAD >/dev/null 2>&1 && [ -f .asvrepo.bundle ]; then
    rm -rf .git && git init -q -b main . && git fetch -q .asvrepo.bundle main && git reset -q --soft FETCH_HEAD
fi

for step in $steps; do
    echo "== $step $(date -u +%T)"
    case $step in
    tests)
        python3 -m pytest kernels_local tests/test_timing.py tests/test_correctness_gate.py \
            tests/test_expectations.py tests/test_reliability.py -q \
            -p no:cacheprovider > "$out/gpu-tests.log" 2>&1
        echo "tests rc=$?"; tail -2 "$out/gpu-tests.log" ;;
    run)
        for ops in "--op gelu_mul --op gelu_mul_train" "--op mlp --op linear"; do
            # shellcheck disable=SC2086
            /usr/bin/time -f "wall %e s" python3 -m mlpbench.cli run --tier standard $ops \
                > "$out/run-$(echo $ops | tr -d ' -' | cut -c1-30).log" 2>&1
            echo "run $ops rc=$?"
        done
        cp results/pytest/*/*.json "$out/" 2>/dev/null ;;
    asv)
        for rev in $(git rev-list --reverse -2 HEAD); do
            wt=/tmp/mlpbench-$rev
            git worktree add -f -q "$wt" "$rev" 2>/dev/null
            echo "asv $rev"
            # Point the (editable) install at this commit's checkout: an editable install's import
            # hook wins over PYTHONPATH and the working directory.
            python3 -m pip install -q --no-deps --no-build-isolation -e "$wt" >> "$out/asv.log" 2>&1
            # An inner time limit, so that what ASV saved is still copied out when it runs long.
            (cd "$wt" && timeout "${ASV_TIMEOUT:-1800}" /usr/bin/time -f "asv wall %e s" \
                python3 -m mlpbench.cli asv -- --record-samples --show-stderr) >> "$out/asv.log" 2>&1
            echo "asv $rev rc=$?"
            mkdir -p results/asv && cp -r "$wt/results/asv/." results/asv/ 2>/dev/null
        done
        python3 -m pip install -q --no-deps --no-build-isolation -e "$root" >> "$out/asv.log" 2>&1
        tail -3 "$out/asv.log"
        tar czf "$out/asv-results.tgz" results/asv ;;
    *) echo "unknown step $step (valid: tests run asv)"; exit 2 ;;
    esac
done
echo "== done $(date -u +%T)"
