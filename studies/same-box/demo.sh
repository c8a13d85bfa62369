#!/usr/bin/env bash
# The study's branches, made on the checked-out commit (it must be clean), and what a device call
# needs to rebuild them there (.commits/, read by scripts/gpu_run.sh):
#   demo/plant   two planted slowdowns sized clearly above what `mlpbench ab` can tell at 3 rounds a
#                side: the gated MLP module's forward (what the eager and compiled variants of mlp and
#                swiglu_mlp run) copies its output twice more (a copy of an output that stays in L2
#                costs less than its bytes suggest), and our GeLU·mul waits 3 µs in its launch path
#   demo/twin    the checked-out commit and one line of prose: identical code, another commit
#   demo/bisect  demo/twin, then four commits: prose, the planted slowdown (the gated MLP copies its
#                output three times), prose, prose
#   .commits/main, .commits/files.txt   the checked-out commit, rebuilt on the box from its tree
#   .commits/demo.bundle                the three branches, fetched whole (their hashes kept)
# Commit dates follow the base commit's by a minute each: the same base commit gives the same branch
# hashes on any machine, and the nightly, which takes the newest earlier commit recorded as its base,
# reads each branch after its parent.
# Existing demo/ branches are never overwritten: delete them first (git branch -D ...).
#
# Usage: bash studies/same-box/demo.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
if [ -n "$(git status --porcelain --untracked-files=no)" ]; then
    echo "demo.sh: the checkout has uncommitted changes; the device rebuilds the commit, not them" >&2
    exit 2
fi
if [ -e .commits/demo ] || [ -e .commits/demo.patch ]; then  # gpu_run.sh would apply it on top of main
    echo "demo.sh: .commits/ holds another demo (demo, demo.patch); move it away first" >&2
    exit 2
fi
for b in demo/plant demo/twin demo/bisect; do
    if git rev-parse -q --verify "refs/heads/$b" > /dev/null; then
        echo "demo.sh: branch $b exists; delete it (git branch -D $b) to make it again" >&2
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
grep -qxF "$eager_forward" "$mlp" || { echo "demo.sh: the gated MLP's forward in $mlp changed" >&2; exit 2; }
grep -qx 'def _planned_forward(gate, up):' "$gelu" || { echo "demo.sh: no _planned_forward in $gelu" >&2; exit 2; }
grep -qx 'import math' "$gelu" || { echo "demo.sh: no 'import math' line in $gelu to import time after" >&2; exit 2; }
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
echo "demo.sh: on ${base:0:12}:"
git log --format='  %h %s' "$base"..demo/plant
git log --reverse --format='  %h %s' "$base"..demo/bisect
echo "  .commits/ written; the bad commit is $(git rev-parse --short demo/bisect~2)"
