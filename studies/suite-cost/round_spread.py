"""How far apart the rounds of back-to-back host time lie, by the length of a round, in one run file.

    python studies/suite-cost/round_spread.py results/pytest/h200/20261203T065047Z-standard-606.json

Per case: its rounds' range (max - min) over their median, and its round's length, reconstructed the way
the run sized it (calls per round from the synchronised single-call host time, at least 10, at most 200,
with the round length the run used, `--round-s`). Cases are grouped by round length.
"""

import argparse
import json
import statistics


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("run")
    ap.add_argument("--round-s", type=float, default=0.05, help="the round length the run used")
    args = ap.parse_args()
    rows = []
    for bench in json.load(open(args.run))["benchmarks"]:
        e = bench["extra_info"]
        s = e.get("host_time_back_to_back_samples_s")
        if not s:
            continue
        calls = max(10, min(200, int(args.round_s / e["host_time_s"])))
        rows.append((calls * statistics.median(s), (max(s) - min(s)) / statistics.median(s)))
    print("| round length | cases | median range of the rounds | largest |")
    print("| --- | --- | --- | --- |")
    for lo, hi in [(0, 0.01), (0.01, 0.03), (0.03, 0.06), (0.06, 10)]:
        g = [r for r in rows if lo <= r[0] < hi]
        if g:
            print(f"| {lo * 1e3:.0f}-{hi * 1e3:.0f} ms | {len(g)} | {statistics.median(r[1] for r in g):.1%} "
                  f"| {max(r[1] for r in g):.1%} |")


if __name__ == "__main__":
    main()
