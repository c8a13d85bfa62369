#!/usr/bin/env bash
# What this study ran on the H200, one step per call (each call lands on a box of its own):
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
# Usage: bash studies/same-box/device.sh OUTDIR STEP ...   (after scripts/gpu_run.sh OUTDIR commit,
# which rebuilds main and fetches the demo branches from .commits/demo.bundle; studies/same-box/demo.sh
# makes both, here, on the commit to measure)
set -uo pipefail
out=${1:?usage: device.sh OUTDIR STEP ...}
shift
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
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

[ -x /usr/bin/time ] || { echo "device.sh: /usr/bin/time is missing (it times each step)"; exit 2; }
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
    *) echo "unknown step $step (valid: record pair bisect trials counted)"; exit 2 ;;
    esac
done
echo "== done $(date -u +%T)"
