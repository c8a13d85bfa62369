#!/usr/bin/env bash
# What studies/same-box ran, one step per call. First, here (no device, no OUTDIR):
#   demo     the study's branches, made on the checked-out commit (it must be clean), and what a
#            device call needs to rebuild them there (.commits/, read by scripts/gpu_run.sh):
#     demo/plant   two planted slowdowns sized clearly above what `mlpbench ab` can tell at 3 rounds a
#                  side: the gated MLP module's forward (what the eager and compiled variants of mlp and
#                  swiglu_mlp run) copies its output twice more (a copy of an output that stays in L2
#                  costs less than its bytes suggest), and our GeLU·mul waits 3 µs in its launch path
#     demo/twin    the checked-out commit and one line of prose: identical code, another commit
#     demo/bisect  demo/twin, then four commits: prose, the planted slowdown (the gated MLP copies its
#                  output three times), prose, prose
#     .commits/main, .commits/files.txt   the checked-out commit, rebuilt on the box from its tree
#     .commits/demo.bundle                the three branches, fetched whole (their hashes kept)
#            Commit dates follow the base commit's by a minute each: the same base commit gives the
#            same branch hashes on any machine, and the nightly, which takes the newest earlier commit
#            recorded as its base, reads each branch after its parent. Existing demo/ branches are
#            never overwritten: delete them first (git branch -D ...).
# Then on the devices (each call lands on a box of its own):
#   record   `mlpbench nightly` of main: the base of the pair, on a first box
#   pair     `mlpbench nightly` of demo/twin (main with one line of prose more) on a second box: the
#            gate compares it with the first box's night; the confirmation measures the flagged cases
#            again here, base against head
#   bisect   `mlpbench nightly` of demo/bisect (demo/twin, then four commits, one planted slowdown)
#            on the box that ran `pair`: the gate compares it with demo/twin's night, the confirmation
#            reproduces it, the bisection names the bad commit
#   trials   `mlpbench ab --paired` of main against demo/plant (two planted slowdowns sized for about 3%),
#            rounds kept for trials.py
#   counted  `mlpbench ab` of the base against demo/twin for COUNTED_SHAPES of the MLP's eager and
#            compiled bf16 cases (the peak memory a night moved for identical code): the per-round
#            peak memory and kernels per call the confirmation reads
# The nightly steps measure the cases PAIR_CASES or BISECT_CASES select (MLPBENCH_CASES) of the
# classes BENCH; PAIR_ARGS adds nightly options to `pair` (e.g. --threshold 1, where the gate's own
# thresholds flag nothing between the two boxes and there is nothing to confirm).
# BASE_REV (default main) is the base commit that `record` measures, `trials` takes as its base and
# each night returns to; PAIR_REV (default demo/twin) is what `pair` measures: a later commit of the
# same measured code (where the base night came from an earlier commit, say) serves as well.
#
# Usage: bash scripts/same_box.sh demo              here, on the commit to measure: the branches
#                                                          and .commits/, alone and without OUTDIR
#        bash scripts/same_box.sh OUTDIR STEP ...   on a device, after scripts/gpu_run.sh OUTDIR
#                                                          commit (which rebuilds main and fetches the
#                                                          demo branches from .commits/demo.bundle)
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

demo() {  # the branches and .commits/, here (under set -e)
    if [ -n "$(git status --porcelain --untracked-files=no)" ]; then
        echo "same_box.sh demo: the checkout has uncommitted changes; the device rebuilds the commit, not them" >&2
        exit 2
    fi
    if [ -e .commits/demo ] || [ -e .commits/demo.patch ]; then  # gpu_run.sh would apply it on top of main
        echo "same_box.sh demo: .commits/ holds another demo (demo, demo.patch); move it away first" >&2
        exit 2
    fi
    for b in demo/plant demo/twin demo/bisect; do
        if git rev-parse -q --verify "refs/heads/$b" > /dev/null; then
            echo "same_box.sh demo: branch $b exists; delete it (git branch -D $b) to make it again" >&2
            exit 2
        fi
    done
    base=$(git rev-parse HEAD)
    tree=$(mktemp -d)
    trap 'git worktree remove --force "$tree" > /dev/null 2>&1; rm -rf "$tree"' EXIT
    git worktree add -q --detach "$tree" "$base"
    export GIT_AUTHOR_NAME="mlpbench study" GIT_AUTHOR_EMAIL="study@mlpbench.invalid"
    export GIT_COMMITTER_NAME="$GIT_AUTHOR_NAME" GIT_COMMITTER_EMAIL="$GIT_AUTHOR_EMAIL"
    n=0
    since=$(git show -s --format=%ct "$base")
    commit() {  # commit SUBJECT: every change in the worktree, a minute after the commit before it
        n=$((n + 1))
        export GIT_AUTHOR_DATE="@$((since + 60 * n)) +0000" GIT_COMMITTER_DATE="@$((since + 60 * n)) +0000"
        git -C "$tree" add -A && git -C "$tree" -c commit.gpgsign=false commit -q --no-verify -m "$1"
    }
    mlp=$tree/mlpbench/ops/_gated.py
    gelu=$tree/kernels_local/gelu_mul/torch-ext/gelu_mul/_gelu_mul.py
    eager_forward='            return self.down_proj(step(self.gate_proj(x), self.up_proj(x)))'
    grep -qxF "$eager_forward" "$mlp" || { echo "same_box.sh demo: the gated MLP's forward in $mlp changed" >&2; exit 2; }
    grep -qx 'def _planned_forward(gate, up):' "$gelu" || { echo "same_box.sh demo: no _planned_forward in $gelu" >&2; exit 2; }
    grep -qx 'import math' "$gelu" || { echo "same_box.sh demo: no 'import math' line in $gelu to import time after" >&2; exit 2; }
    plant_mlp() {  # plant_mlp COPIES: the gated MLP's output copied COPIES times
        local copies
        copies=$(printf '.clone()%.0s' $(seq "$1"))
        sed -i "s|^$eager_forward\$|$eager_forward$copies|" "$mlp"
    }

    # demo/plant
    plant_mlp 2
    sed -i 's|^import math$|import math\nimport time|' "$gelu"
    sed -i 's|^def _planned_forward(gate, up):$|&\n    t0 = time.perf_counter_ns()\n    while time.perf_counter_ns() - t0 < 3000:\n        pass|' "$gelu"
    commit "Planted: the gated MLP copies its output twice; GeLU·mul waits 3 us"
    git branch demo/plant "$(git -C "$tree" rev-parse HEAD)"

    # demo/twin and demo/bisect
    git -C "$tree" checkout -q --detach "$base"
    echo "A twin of its parent: identical code, another commit." > "$tree/studies/same-box/twin.txt"
    commit "Same-box study: a twin commit"
    git branch demo/twin "$(git -C "$tree" rev-parse HEAD)"
    echo "Prose between the twin and the planted slowdown." >> "$tree/studies/same-box/twin.txt"
    commit "Same-box study: prose before the bad commit"
    plant_mlp 3
    commit "Same-box study: the gated MLP copies its output three times"
    echo "Prose after the planted slowdown." >> "$tree/studies/same-box/twin.txt"
    commit "Same-box study: prose after the bad commit"
    echo "More prose: the range is four commits long." >> "$tree/studies/same-box/twin.txt"
    commit "Same-box study: the last commit of the range"
    git branch demo/bisect "$(git -C "$tree" rev-parse HEAD)"

    mkdir -p .commits
    git cat-file commit "$base" > .commits/main
    git ls-files > .commits/files.txt
    git bundle create -q .commits/demo.bundle demo/plant demo/twin demo/bisect --not "$base"
    echo "same_box.sh demo: on ${base:0:12}:"
    git log --format='  %h %s' "$base"..demo/plant
    git log --reverse --format='  %h %s' "$base"..demo/bisect
    echo "  .commits/ written; the bad commit is $(git rev-parse --short demo/bisect~2)"
}

if [ "${1:-}" = demo ]; then
    if [ $# -ne 1 ]; then
        echo "same_box.sh: demo runs here, alone and without OUTDIR: bash scripts/same_box.sh demo" >&2
        exit 2
    fi
    set -euo pipefail
    demo
    exit 0
fi

set -uo pipefail
out=${1:?usage: same_box.sh demo | same_box.sh OUTDIR STEP ...}
shift
export PYTHONUNBUFFERED=1
BENCH=${BENCH:-'^standard\.Mlp(Device|Codegen)\.'}
PAIR_CASES=${PAIR_CASES:-'^mlp/(eager|compiled|liger|ours|dualgemm)/bf16/'}
BISECT_CASES=${BISECT_CASES:-'^mlp/(eager|liger|ours)/bf16/t8192-d768-h3072$'}
BASE_REV=${BASE_REV:-main}
PAIR_REV=${PAIR_REV:-demo/twin}

night() {  # night NAME REV CASES [nightly options]: the nightly of REV, its files copied to $out/NAME/
    local name=$1 rev=$2 cases=$3
    shift 3
    git checkout -q -f "$rev" || { echo "$name: no revision $rev"; return 1; }
    mkdir -p "$out/$name"
    echo "== $name: $(git log -1 --format='%h %s') $(date -u +%T)"
    MLPBENCH_CASES=$cases /usr/bin/time -f "$name wall %e s" python3 -m mlpbench.cli nightly --bench "$BENCH" \
        --no-publish --summary "$out/$name/summary.md" --json "$out/$name/verdicts.json" "$@" \
        > "$out/$name/nightly.log" 2>&1
    echo "$name nightly rc=$?"; grep wall "$out/$name/nightly.log"
    cp results/asv/*/"$(git rev-parse HEAD | cut -c1-8)"-*.json "$out/$name/" 2>/dev/null
    cp -r results/confirmations "$out/$name/" 2>/dev/null
    cp results/nightly/*.json "$out/$name/" 2>/dev/null  # the night's wall-time history, reset by the checkout
    git checkout -q -f "$BASE_REV"
}

[ -x /usr/bin/time ] || { echo "same_box.sh: /usr/bin/time is missing (it times each step)"; exit 2; }
python3 -m asv machine --yes > /dev/null 2>&1
for step in "$@"; do
    case $step in
    record) night record "$BASE_REV" "$PAIR_CASES" --no-confirm ;;
    pair) night pair "$PAIR_REV" "$PAIR_CASES" ${PAIR_ARGS:-} ;;
    bisect) night bisect demo/bisect "$BISECT_CASES" ;;
    trials)
        mkdir -p "$out/trials"
        /usr/bin/time -f "trials wall %e s" python3 -m mlpbench.cli ab --base "$BASE_REV" --head demo/plant \
            --op mlp --op gelu_mul --variant eager --variant ours --dtype bf16 \
            --shape t8192-d768-h3072 --shape t1-h16384 --rounds "${ROUNDS:-8}" --paired \
            --results "$out/trials/rounds" --markdown "$out/trials/ab.md" > "$out/trials/ab.log" 2>&1
        echo "trials ab rc=$?"; tail -3 "$out/trials/ab.log" ;;
    counted)
        mkdir -p "$out/counted"
        shapes=()
        for sh in ${COUNTED_SHAPES:-t333-d768-h3000 t1024-d768-h3072}; do shapes+=(--shape "$sh"); done
        /usr/bin/time -f "counted wall %e s" python3 -m mlpbench.cli ab --base "$BASE_REV" --head demo/twin \
            --op mlp --variant eager --variant compiled --dtype bf16 "${shapes[@]}" --rounds "${ROUNDS:-2}" \
            --results "$out/counted/rounds" --markdown "$out/counted/ab.md" > "$out/counted/ab.log" 2>&1
        echo "counted ab rc=$?"; tail -3 "$out/counted/ab.log" ;;
    demo) echo "same_box.sh: demo runs here, alone and without OUTDIR: bash scripts/same_box.sh demo"; exit 2 ;;
    *) echo "unknown step $step (valid: record pair bisect trials counted; demo runs alone, here)"; exit 2 ;;
    esac
done
echo "== done $(date -u +%T)"
