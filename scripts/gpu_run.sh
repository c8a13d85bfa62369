#!/usr/bin/env bash
# What a GPU box records for the repository, step by step:
#   tests  the kernel repository's tests and the harness's GPU tests
#   run    the standard tier through pytest-benchmark (`mlpbench run --tier standard`), timed
#   asv    ASV's own commands for the checked-out commit, timed: `asv machine --yes`, then one plain
#          `asv run` in this Python of the standard family's device and host benchmarks
#   nightly  `mlpbench nightly` for the checked-out commit (standard family through ASV, compile
#          benchmarks included, publish, gate), then a plain `asv compare` with the commit before
#   aa     A/A: device time of the checked-out commit in two ASV runs, the second kept in its own
#          results folder, gated against the first
#   slowdown  the unmerged branch demo/slow-block (our kernel with a poor block size) through ASV,
#          gated against the checked-out commit (run `nightly` or `aa` before it)
#   shards the standard tier split over every visible GPU (`mlpbench run --shards auto`)
#   compiled  A/A of the compiled cases: the standard tier's AA_VARIANTS (default: compiled), or the
#          cases of the pytest -k expression AA_K, in AA_RUNS (default 2) fresh pytest processes numbered
#          from AA_FROM (default 1); every op in one process, so each case also runs after all the
#          others (the MLP's first); each process its own results file
#   after  the compiled MLP and GeLU·mul cases in one pytest process, the MLP's first
#   asvdemo  plain `asv run` of the checked-out commit and of the branch DEMO_BRANCH (default
#          demo/dynamic-compile; with .commits/, the demo commit demo.patch makes, e.g. a graph break),
#          then the gate between them: what it says when the generated code changed
#   alone  ALONE_CASES (case ids, space-separated), each in a process of its own: the same cases
#          measured after every other case (the run step) and alone, for the hermetic check
#   pinned the compiled cases PIN_CASES (a pytest -k expression) in one process, each started from
#          the autotuner's picks recorded in PIN_FROM (a results file): MLPBENCH_PIN_AUTOTUNE
#   dualtests  kernels_local/gated_dual_gemm's tests and the kernel repositories' build tests
#   sweep  scripts/dual_gemm_sweep.py $SWEEP_ARGS: the dual GEMM's tile sweep (or --crossover, --fp8,
#          --layouts, --backward)
#   elementwise  scripts/elementwise_sweep.py: our elementwise kernels' launch-table sweep
#   paired  `mlpbench run --tier standard --paired` of PAIRED_OPS (default: the ops of
#          studies/paired-host) and of PAIRED_DTYPES (default: every dtype), into OUTDIR/paired/
#   commit only rebuild the checked-out commit (above) and print it: before commands of one's own
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
# Without one (a working tree and a bundle together can exceed what a device call carries),
# .commits/ rebuilds the commits from the tree itself: `main`, the checked-out commit's raw object
# (`git cat-file commit HEAD`) with `files.txt` (`git ls-files`), and optionally `demo` with
# `demo.patch`, one commit on top. Same tree, same parent, same metadata: the same hash, so result
# files name the real commit. `main` is marked shallow: its history is not here.
if [ -f .commits/main ] && [ ! -f .asvrepo.bundle ]; then
    rm -rf .git && git init -q -b main . && printf '/.whl/\n/.commits/\n' >> .git/info/exclude
    remake() {  # remake NAME: commit .commits/NAME from the index, check its tree, name a branch
        local tree want sha
        tree=$(git write-tree --missing-ok); want=$(sed -n 's/^tree //p' ".commits/$1")
        [ "$tree" = "$want" ] || echo "gpu_run: tree $tree is not $1's $want: its commit hash will differ"
        sha=$(git hash-object -t commit -w ".commits/$1")
        git update-ref "refs/heads/$2" "$sha"; echo "commit ${sha:0:12} as $2"
    }
    # With `index.txt` (`git ls-files -s`) in place of files.txt, files left behind (a call carries
    # 64 MiB; committed results and study data need not travel) enter the index by their hashes,
    # marked skip-worktree: the tree, so the commit hash, stays the same, and git sees them unchanged.
    left=0
    if [ -f .commits/index.txt ]; then
        : > /tmp/gpu_run.present
        while IFS=$'\t' read -r meta path; do
            read -r mode sha _ <<< "$meta"
            if [ -e "$path" ]; then printf '%s\n' "$path" >> /tmp/gpu_run.present
            else git update-index --add --cacheinfo "$mode,$sha,$path" && git update-index --skip-worktree "$path"
                left=$((left + 1)); fi
        done < .commits/index.txt
        echo "gpu_run: $left committed files left behind, indexed by hash"
        git add --pathspec-from-file=/tmp/gpu_run.present
    else
        git add --pathspec-from-file=.commits/files.txt
    fi
    remake main main && git rev-parse main > .git/shallow
    if [ -f .commits/demo ]; then
        git apply .commits/demo.patch && git add -u && remake demo "${DEMO_BRANCH:-demo/dynamic-compile}"
    fi
    # A hard reset would check out the files left behind, whose contents are not here.
    [ "$left" = 0 ] && git reset -q --hard main
    # branches built on main (`git bundle create .commits/demo.bundle <branches> --not main`): fetched
    # whole, so their commits keep their hashes
    if [ -f .commits/demo.bundle ]; then
        git fetch -q .commits/demo.bundle 'refs/heads/demo/*:refs/heads/demo/*' && git branch --list 'demo/*'
    fi
elif [ -f .asvrepo.bundle ]; then
    rm -rf .git && git init -q -b main . && git fetch -q .asvrepo.bundle main && git reset -q --soft FETCH_HEAD
    git fetch -q .asvrepo.bundle 'refs/heads/demo/*:refs/heads/demo/*' 2>/dev/null
fi
head=$(git rev-parse HEAD)
touch /tmp/gpu_run.start
# Compiler caches for one step: FRESH=1 gives each timed step empty Inductor and Triton caches of its
# own, so that `mlpbench run` and `asv run` compile from the same (cold) start and their wall times
# compare; the asv step's caches stay in /tmp/mlpbench-cache-asv for a later nightly on the same box.
caches() {
    [ "${FRESH:-0}" = 1 ] || return 0
    local dir=/tmp/mlpbench-cache-$1
    [ "$1" = nightly ] && [ -d /tmp/mlpbench-cache-asv ] && dir=/tmp/mlpbench-cache-asv
    [ "$1" = nightly ] || rm -rf "$dir"
    export TORCHINDUCTOR_CACHE_DIR=$dir/inductor TRITON_CACHE_DIR=$dir/triton
    echo "caches for $1: $dir"
}
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
        caches run
        # --durations: every case's setup and call time, to size later runs (compiled cases compile in setup)
        /usr/bin/time -f "mlpbench run wall %e s" python3 -m mlpbench.cli run --tier standard -- --durations=0 \
            > "$out/run.log" 2>&1
        echo "run rc=$?"; grep "wall" "$out/run.log"
        new_pytest_results ;;
    runops)
        # The standard tier one op per process (each its own results file), GPU memory logged per case
        for op in ${RUN_OPS:-$(python3 -c "from mlpbench import registry; print(*registry.OPS)")}; do
            MLPBENCH_MEMORY_LOG="$out/memory.log" /usr/bin/time -f "mlpbench run $op wall %e s" \
                python3 -m mlpbench.cli run --tier standard --op "$op" -- --durations=0 >> "$out/run.log" 2>&1
            echo "run $op rc=$?"
        done
        grep "wall" "$out/run.log"
        new_pytest_results ;;
    asv)
        caches asv
        python3 -m asv machine --yes > "$out/asv.log" 2>&1
        /usr/bin/time -f "asv run wall %e s" python3 -m asv run -E "existing:$(command -v python3)" \
            --set-commit-hash "$head" --record-samples --show-stderr --bench '^standard\.\w+(Device|Host|Codegen)\.' \
            >> "$out/asv.log" 2>&1
        echo "asv rc=$?"; grep "wall" "$out/asv.log"
        tar czf "$out/asv-results.tgz" results/asv ;;
    nightly)
        caches nightly
        /usr/bin/time -f "nightly wall %e s" python3 -m mlpbench.cli nightly --summary "$out/nightly-summary.md" \
            >> "$out/nightly.log" 2>&1
        echo "nightly rc=$?"; tail -4 "$out/nightly.log"
        # ASV's own comparison, without --machine: one machine holds both commits.
        python3 -m asv compare "$(git rev-parse HEAD~1)" "$head" > "$out/asv-compare.log" 2>&1
        echo "asv compare rc=$?"; tail -3 "$out/asv-compare.log"
        tar czf "$out/asv-results.tgz" results/asv ;;
    aa)
        # Device time of the same commit in two ASV runs. The second runs in a checkout of its own,
        # so its own results folder (ASV keys results by commit: a second run in the same folder
        # would overwrite the first). AA_OPS narrows the classes (default: every op).
        git worktree add -f -q /tmp/mlpbench-aa "$head" 2>/dev/null
        for op in ${AA_OPS:-GeluMul GeluMulTrain Mlp Linear}; do
            for repo in "$root" /tmp/mlpbench-aa; do
                python3 -m mlpbench.cli asv --repo "$repo" --bench "^standard\.${op}Device\." -- --record-samples \
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
        python3 -m mlpbench.cli asv --repo /tmp/mlpbench-slow --bench '^standard\.GeluMulDevice\.' \
            -- --record-samples >> "$out/slowdown.log" 2>&1
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
    compiled)
        # Each run's file is copied as soon as it ends, so a call cut short keeps the runs it finished.
        for k in $(seq "${AA_FROM:-1}" "$((${AA_FROM:-1} + ${AA_RUNS:-2} - 1))"); do
            caches "compiled-$k"
            if [ -n "${AA_K:-}" ]; then select=(-k "$AA_K"); else
                read -r -a select <<< "$(printf -- '--variant %s ' ${AA_VARIANTS:-compiled})"; fi
            /usr/bin/time -f "compiled run $k wall %e s" python3 -m pytest benchmarks --tier standard \
                "${select[@]}" -q -p no:cacheprovider \
                --benchmark-json "$out/compiled-aa-$k.json" > "$out/compiled-$k.log" 2>&1
            echo "compiled run $k rc=$?"; grep -E "wall|passed|failed" "$out/compiled-$k.log" | tail -2
        done ;;
    after)
        # The hermetic check's other half: the compiled MLP and GeLU·mul cases in ONE pytest process, the
        # MLP's first (the order that once left GeLU·mul at 8192 × 3072 with the MLP's launch configuration).
        python3 -m pytest benchmarks --tier standard --op mlp --op gelu_mul --variant compiled -q \
            -p no:cacheprovider --benchmark-json "$out/after-others.json" > "$out/after.log" 2>&1
        echo "after rc=$?"; tail -1 "$out/after.log" ;;
    asvdemo)
        # The gate on two real commits whose compiled code differs: the checked-out commit, then the
        # demo branch (DEMO_BRANCH, default demo/dynamic-compile), each through plain `asv run` of
        # DEMO_BENCH (default: the standard family's GeLU·mul device and codegen benchmarks).
        demo=$(git rev-parse "${DEMO_BRANCH:-demo/dynamic-compile}")
        bench=${DEMO_BENCH:-'^standard\.GeluMul(Device|Codegen)\.'}
        # A --bench that matches nothing makes asv run exit 1 after discovery: say so before spending
        # the GPU's time (the benchmark set is the committed one on every machine).
        matched=$(python3 -c 'import json, re, sys
print(sum(bool(re.search(sys.argv[1], n)) for n in json.load(open("results/asv/benchmarks.json")) if n != "version"))' "$bench")
        echo "asvdemo: --bench '$bench' selects $matched benchmarks"
        if [ "$matched" = 0 ]; then echo "asvdemo: nothing to run; skipped"; continue; fi
        python3 -m asv machine --yes > "$out/asvdemo.log" 2>&1
        for sha in "$head" "$demo"; do
            git checkout -q -f "$sha"
            /usr/bin/time -f "asv run $sha wall %e s" python3 -m asv run -E "existing:$(command -v python3)" \
                --set-commit-hash "$sha" --record-samples --show-stderr --bench "$bench" >> "$out/asvdemo.log" 2>&1
            echo "asv run ${sha:0:8} rc=$?"
        done
        git checkout -q -f "$head"
        python3 -m mlpbench.cli check --base "$head" --head "$demo" > "$out/asvdemo-check.md" 2>&1
        echo "check rc=$? (1 expected: the demo regresses)"
        python3 -m mlpbench.cli check --base "$head" --head "$demo" --json > "$out/asvdemo-check.json" 2>/dev/null
        tar czf "$out/asvdemo-results.tgz" results/asv results/codegen.json 2>/dev/null ;;
    alone)
        for c in ${ALONE_CASES:?set ALONE_CASES to case ids}; do
            IFS=/ read -r op variant dtype shape <<< "$c"
            python3 -m mlpbench.cli run --tier standard --op "$op" --variant "$variant" --dtype "$dtype" \
                --shape "$shape" >> "$out/alone.log" 2>&1
            echo "alone $c rc=$?"
        done
        new_pytest_results ;;
    pinned)
        MLPBENCH_PIN_AUTOTUNE=${PIN_FROM:?set PIN_FROM to a results file} python3 -m pytest benchmarks \
            --tier standard --variant compiled -k "${PIN_CASES:?set PIN_CASES}" -q -p no:cacheprovider \
            --benchmark-json "$out/compiled-pinned.json" > "$out/pinned.log" 2>&1
        echo "pinned rc=$?"; tail -1 "$out/pinned.log" ;;
    dualtests)
        timeout "${DUALTESTS_TIMEOUT:-150}" python3 -m pytest kernels_local/gated_dual_gemm kernels_local/tests -q \
            -p no:cacheprovider > "$out/dual-tests.log" 2>&1
        echo "dualtests rc=$?"; tail -2 "$out/dual-tests.log" ;;
    sweep)
        timeout "${SWEEP_TIMEOUT:-240}" python3 scripts/dual_gemm_sweep.py ${SWEEP_ARGS:-} \
            --output "$out/dual-gemm-${SWEEP_NAME:-sweep}.json" > "$out/${SWEEP_NAME:-sweep}.log" 2>&1
        echo "sweep rc=$?"; grep "^best" "$out/${SWEEP_NAME:-sweep}.log" ;;
    elementwise)
        timeout "${SWEEP_TIMEOUT:-300}" python3 scripts/elementwise_sweep.py --output "$out/elementwise-sweep.json" \
            > "$out/elementwise-sweep.log" 2>&1
        echo "elementwise sweep rc=$?"; grep -E "^best|wall" "$out/elementwise-sweep.log" ;;
    paired)
        read -r -a ops <<< "$(printf -- '--op %s ' ${PAIRED_OPS:-mlp swiglu_mlp gelu_mul silu_mul gelu_mul_train llama_model gemma_model})"
        [ -n "${PAIRED_DTYPES:-}" ] && read -r -a dts <<< "$(printf -- '--dtype %s ' $PAIRED_DTYPES)" && ops+=("${dts[@]}")
        /usr/bin/time -f "paired wall %e s" python3 -m mlpbench.cli run --tier standard --paired \
            --results "$out/paired" "${ops[@]}" > "$out/paired.log" 2>&1
        echo "paired rc=$?"; grep -E "wall|passed|failed" "$out/paired.log" | tail -3 ;;
    commit)
        echo "commit $head" ;;
    *) echo "unknown step $step (valid: tests run runops asv nightly aa slowdown shards compiled after asvdemo alone pinned dualtests sweep elementwise paired commit)"; exit 2 ;;
    esac
done
echo "== done $(date -u +%T)"
