#!/usr/bin/env bash
# Everything a GPU box records for the repository in one go: the kernel repository's and the
# harness's GPU tests, the standard tier through pytest-benchmark (`mlpbench run`), and the
# standard tier through ASV for the last two commits, each measured from its own checkout.
# With two GPUs the ASV runs go to the second GPU while the first runs the rest; ASV's two
# commits always share one GPU, so `asv compare` compares like with like.
#
# Usage: bash scripts/gpu_run.sh OUTDIR        (logs and results are copied to OUTDIR)
# Expects: a Python with CUDA torch and mlpbench's dependencies; a git checkout (or a bundle
# at .asvrepo.bundle, unpacked here into a repository).
set -uo pipefail
out=${1:?usage: gpu_run.sh OUTDIR}
mkdir -p "$out"
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1

if [ ! -d .git ] && [ -f .asvrepo.bundle ]; then
    git init -q -b main . && git fetch -q .asvrepo.bundle 'refs/heads/*:refs/heads/*' 2>/dev/null \
        || git fetch -q .asvrepo.bundle main:main
    git reset -q --soft main
fi
ngpu=$(python3 -c "import torch; print(torch.cuda.device_count())")
asv_gpu=$(( ngpu > 1 ? 1 : 0 ))
echo "gpus: $ngpu; ASV on GPU $asv_gpu; commits: $(git log --format=%h -2 | tr '\n' ' ')"

asv_commits() {
    # One worktree per commit; ASV_PYTHONPATH puts that commit's mlpbench ahead of the installed one.
    for rev in $(git rev-list --reverse -2 HEAD); do
        wt=/tmp/mlpbench-$rev
        git worktree add -f -q "$wt" "$rev" 2>/dev/null || true
        cp -r kernels_local/gelu_mul "$wt/kernels_local/" 2>/dev/null || true
        echo "== asv $rev $(date -u +%T)"
        (cd "$wt" && CUDA_VISIBLE_DEVICES=$asv_gpu ASV_PYTHONPATH="$wt" \
            /usr/bin/time -f "asv wall %e s" python3 -m mlpbench.cli asv -- --record-samples --show-stderr) 2>&1
        mkdir -p "$root/results/asv"
        cp -r "$wt/results/asv/." "$root/results/asv/"
    done
    echo "== asv done $(date -u +%T)"
}

if [ "$ngpu" -gt 1 ]; then
    asv_commits > "$out/asv.log" 2>&1 &
    asv_pid=$!
fi

echo "== tests $(date -u +%T)"
CUDA_VISIBLE_DEVICES=0 python3 -m pytest kernels_local tests -q -p no:cacheprovider \
    --deselect tests/test_asv_offline.py > "$out/gpu-tests.log" 2>&1
echo "tests rc=$?"; tail -3 "$out/gpu-tests.log"

echo "== mlpbench run standard $(date -u +%T)"
CUDA_VISIBLE_DEVICES=0 /usr/bin/time -f "run wall %e s" python3 -m mlpbench.cli run --tier standard \
    > "$out/run-standard.log" 2>&1
echo "run rc=$?"; tail -2 "$out/run-standard.log"
cp results/pytest/*/*.json "$out/" 2>/dev/null

if [ "$ngpu" -gt 1 ]; then wait "$asv_pid"; else asv_commits > "$out/asv.log" 2>&1; fi
tail -3 "$out/asv.log"
tar czf "$out/asv-results.tgz" results/asv
echo "== all done $(date -u +%T)"
