"""ASV plugin: the dashboard's Regressions page lists what `mlpbench check` fails on, nothing else.

ASV's own page runs a step detector over each series with a fixed threshold. The gate judges each
step between consecutive commits of a machine with the case's own noise, a significance test, the
autotuner's picks and, for back-to-back host time, whether one box measured both. Two rules for one
question gave two answers, so `asv publish` (with `"plugins": [".mlpbench.asv.regressions"]`) fills
regressions.json and its feed from the gate's verdicts instead: a step is listed when `mlpbench
check --base <commit before> --head <commit>` calls it a regression, unless the nightly measured it
again on that box and did not reproduce it (box noise: results/confirmations/<machine>/, written by
mlpbench/judging/confirm.py). asv.conf.json's `regressions_first_commits` still decides which benchmarks the
page may list at all.

The publish also notes the fleet's stale machines (mlpbench/fleet.py) in the built folder, for the
dashboard's banner (mlpbench/asv/dashboard.py).
"""

from __future__ import annotations

import itertools
from pathlib import Path

try:
    from asv.plugins.regressions import Regressions as _Regressions
    from asv.plugins.regressions import _GraphDataFilter
except ImportError:  # pragma: no cover - asv not installed
    _Regressions = None


def gate_steps(results_dir: Path) -> dict[tuple[str, str, str], list[tuple[str, str, float, float]]]:
    """(machine, benchmark, param) → [(commit before, commit, value before, value)] for every step
    between consecutive commits of a machine that the gate calls a regression and that no same-box
    confirmation called box noise."""
    from ..judging import confirm, gate

    points = gate.load(Path(results_dir))
    out: dict[tuple[str, str, str], list] = {}
    for machine in sorted({p.machine for p in points}):
        commits = sorted({(p.date, p.commit) for p in points if p.machine == machine and p.value is not None})
        if len(commits) < 2:
            continue
        before = {cur: prev for (_, prev), (_, cur) in zip(commits, commits[1:])}
        confirmed = confirm.load(Path(results_dir).parent, machine)
        for head, v in gate.history(points, len(commits), machine, codegen_root=Path(results_dir).parent):
            if confirmed.get((head, v.benchmark, v.param)) == confirm.NOISE:
                continue
            out.setdefault((machine, v.benchmark, v.param), []).append((before[head], head, v.base, v.head))
    return out


def entries(graphs, benchmarks, revisions, data_filter, steps_by_key) -> list[list]:
    """regressions.json's rows for the gate's steps: [name with parameters, graph path, the graph's
    distinguishing parameters, parameter index, latest value, best value, jumps], as ASV writes them."""
    from ..results import identify

    all_params = graphs.get_params()
    rows = []
    for file_name, graph in graphs:
        if "summary" in graph.params:
            continue
        name = Path(file_name).name
        benchmark = benchmarks.get(name)
        if not benchmark:
            continue
        combos = list(itertools.product(*benchmark["params"])) if benchmark.get("params") else []
        for j, entry_name, steps, _threshold in data_filter.get_graph_data(graph, benchmark):
            combo = tuple(v.strip("'") for v in combos[j]) if j is not None else ()
            ((param, _),) = identify(name, [combo]) if combo else [("", None)]
            found = steps_by_key.get((graph.params.get("machine"), name, param))
            if not found or not steps:
                continue
            jumps = [(revisions.get(base), revisions[head], before, after)
                     for base, head, before, after in found if head in revisions]
            if not jumps:
                continue
            values = [s[2] for s in steps]
            shown = {k: v for k, v in graph.params.items() if len(all_params[k]) > 1}
            rows.append([entry_name, graph.path + ".json", shown, j, values[-1], min(values), jumps])
    return rows


def publish(cls, conf, repo, benchmarks, graphs, revisions) -> None:
    """ASV's Regressions publisher, with the gate's verdicts in place of ASV's step detector."""
    steps = gate_steps(Path(conf.results_dir))
    regressions = entries(graphs, benchmarks, revisions, _GraphDataFilter(conf, repo, revisions), steps)
    cls._save(conf, {"regressions": regressions})
    cls._save_feed(conf, benchmarks, regressions, revisions, {r: h for h, r in revisions.items()})
    from . import dashboard as asv_dashboard
    from .. import fleet

    # Silence is an alert: the nightly's machines that stored nothing lately head the dashboard.
    machines = fleet.fleet_machines(conf.results_dir)
    asv_dashboard.note_stale(conf.html_dir, fleet.stale_lines(Path(conf.results_dir), machines))
    # The cross-GPU view reads the pytest runs beside ASV's results (results/pytest next to results/asv).
    asv_dashboard.note_portability(conf.html_dir, Path(conf.results_dir).parent)


def setup() -> None:
    """asv plugin hook: ASV's Regressions page (and its feed) are written from the gate's verdicts."""
    if _Regressions is None or getattr(_Regressions.publish, "_mlpbench_gate", False):
        return
    publish._mlpbench_gate = True
    _Regressions.publish = classmethod(publish)
