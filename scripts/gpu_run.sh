#!/usr/bin/env bash
# What a GPU box records for the repository, step by step:
#   tests  the kernel repository's tests and the harness's GPU tests
#   run    the standard tier through pytest-benchmark (`mlpbench run`), one op group at a time
#   asv    the standard tier through ASV for the last two commits, each from its own checkout,
#          on one GPU so that `asv compare` compares like with like (MLPBENCH_CASES narrows it)
#   nightly  `mlpbench nightly` for the checked-out commit (standard tier through ASV, publish, gate)
#   aa     A/A: device time of the checked-out commit in two ASV runs, the second kept in its own
#          results folder, gated against the first
#   slowdown  the unmerged branch demo/slow-block (our kernel with a poor block size) through ASV,
#          gated against the checked-out commit (run `nightly` or `aa` before it)
#   shards the standard tier split over every visible GPU (`mlpbench run --shards auto`)
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
# A box with no network publishes with the report's assets carried in (python -m mlpbench.asv_offline
# fetch, elsewhere, then copy ~/.cache/mlpbench/asv-assets to .asv-assets).
[ -d .asv-assets ] && export MLPBENCH_ASV_ASSETS=$root/.asv-assets

# A bundle, when there is one, is the history to use (a copied tree may carry a stale .git).
if [ -f .asvrepo.bundle ]; then
    rm -rf .git && git init -q -b main . && git fetch -q .asvrepo.bundle main && git reset -q --soft FETCH_HEAD
    git fetch -q .asvrepo.bundle 'refs/heads/demo/*:refs/heads/demo/*' 2>/dev/null
fi
head=$(git rev-parse HEAD)
touch /tmp/gpu_run.start
# Only files this run wrote go back: the device returns at most 8.
new_pytest_results() { find results/pytest -name '[!.]*.json' -newer /tmp/gpu_run.start -exec cp {} "$out/" \; ; }

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
        new_pytest_results ;;
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
    nightly)
        # NIGHTLY_ARGS=--resume goes on after a run that a time limit stopped.
        # shellcheck disable=SC2086
        /usr/bin/time -f "nightly wall %e s" python3 -m mlpbench.cli nightly --summary "$out/nightly-summary.md" \
            ${NIGHTLY_ARGS:-} >> "$out/nightly.log" 2>&1
        echo "nightly rc=$?"; tail -4 "$out/nightly.log" ;;
    aa)
        # Device time of the same commit in two ASV runs. The second runs in a checkout of its own,
        # so its own results folder (ASV keys results by commit: a second run in the same folder
        # would overwrite the first). AA_OPS narrows the classes (default: every op).
        git worktree add -f -q /tmp/mlpbench-aa "$head" 2>/dev/null
        for op in ${AA_OPS:-GeluMul GeluMulTrain Mlp Linear}; do
            for repo in "$root" /tmp/mlpbench-aa; do
                python3 -m mlpbench.cli asv --repo "$repo" -- --record-samples --bench "^asv_cases\.${op}Device\." \
                    >> "$out/aa.log" 2>&1
            done
        done
        mkdir -p results/asv-aa && cp -r /tmp/mlpbench-aa/results/asv/. results/asv-aa/
        python3 -m mlpbench.cli check --results results/asv-aa --base-results results/asv --base "$head" --head "$head" \
            >> "$out/aa.log" 2>&1
        echo "aa check rc=$?"; grep "benchmarks compared" "$out/aa.log" | tail -1 ;;
    slowdown)
        slow=$(git rev-parse demo/slow-block)
        git worktree add -f -q /tmp/mlpbench-slow "$slow" 2>/dev/null
        python3 -m pip install -q --no-deps --no-build-isolation -e /tmp/mlpbench-slow >> "$out/slowdown.log" 2>&1
        python3 -m mlpbench.cli asv --repo /tmp/mlpbench-slow --cases 'gelu_mul/*/bf16/*,gelu_mul/*/fp16/*' \
            -- --record-samples --bench '^asv_cases\.GeluMulDevice\.' >> "$out/slowdown.log" 2>&1
        python3 -m pip install -q --no-deps --no-build-isolation -e "$root" >> "$out/slowdown.log" 2>&1
        mkdir -p results/asv-slowdown && cp -r /tmp/mlpbench-slow/results/asv/. results/asv-slowdown/
        python3 -m mlpbench.cli check --results results/asv-slowdown --base-results results/asv --base "$head" \
            --head "$slow" >> "$out/slowdown.log" 2>&1
        echo "slowdown check rc=$? (1 expected: a regression)"; grep "benchmarks compared" "$out/slowdown.log" | tail -1 ;;
    shards)
        nvidia-smi -L
        /usr/bin/time -f "wall %e s" python3 -m mlpbench.cli run --tier standard --shards auto > "$out/shards.log" 2>&1
        echo "shards rc=$?"; tail -3 "$out/shards.log"
        new_pytest_results ;;
    *) echo "unknown step $step (valid: tests run asv nightly aa slowdown shards)"; exit 2 ;;
    esac
done
echo "== done $(date -u +%T)"
