"""The summary ranks every variant twice, by device time and by back-to-back host time, each variant
by its own newest record: a variant that older runs lack is still in the comparison.

The results are synthetic and built here: run 1 holds eager, compiled and ours; run 2, newer, holds
ours again and dualgemm, the fastest by device time, but no eager (as a run of a few variants does).
By back-to-back host time ours wins, and its figures come from run 2, not run 1.
"""

import json

import pytest

from mlpbench import pages, report, tables

MACHINE = "box"
SHAPES = {"t512-d1024-h4096": {"t": 512, "d": 1024, "h": 4096}, "t1024-d1024-h4096": {"t": 1024, "d": 1024, "h": 4096}}
OLD, NEW = "20261201T000000Z-standard-1.json", "20261202T000000Z-standard-2.json"
# µs per call at the smaller shape, (device, host back to back); the larger shape takes twice as long.
# Run 1's ours differs from run 2's, so a figure read from the wrong run changes the ratios asserted below.
RUN_1 = {"eager": (100.0, 110.0), "compiled": (90.0, 150.0), "ours": (80.0, 95.0)}
RUN_2 = {"ours": (81.0, 96.0), "dualgemm": (60.0, 120.0)}


def _samples(median_us: float, noisy: bool = False) -> list[float]:
    spread = 0.5 if noisy else 0.01  # an IQR of half the median is over tables.NOISY_SPREAD; 1% is not
    return [median_us * 1e-6 * (1 + k * spread) for k in (-1, 0, 1)]


def _record(variant, shape_id, device_us, host_us, noisy_host=False, single_us=200.0):
    """One record; single_us is the host time of one synchronised call, which a CPU run has alone."""
    dims = SHAPES[shape_id]
    info = {"case": f"mlp/{variant}/bf16/{shape_id}", "op": "mlp", "variant": variant, "dtype": "bf16",
            "shape_id": shape_id, "shape": dims, "flops": 4 * dims["t"] * dims["d"] * dims["h"],
            "bytes": 2 * (dims["t"] * dims["d"] * 2 + 2 * dims["d"] * dims["h"]), "host_time_s": single_us * 1e-6}
    if device_us is not None:
        info |= {"device_time_s": device_us * 1e-6, "device_time_samples_s": _samples(device_us)}
    if host_us is not None:
        info |= {"host_time_back_to_back_s": host_us * 1e-6,
                 "host_time_back_to_back_samples_s": _samples(host_us, noisy_host)}
    return {"stats": {"median": single_us * 1e-6, "iqr": 0.0}, "extra_info": info}


def _run(path, when, records, machine=MACHINE, ceilings=None):
    ceilings = {"copy_bandwidth_Bps": 4.0e12, "gemm_bf16_flops": 700e12} if ceilings is None else ceilings
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"datetime": when, "benchmarks": records,
                                "machine_info": {"mlpbench": {"machine": machine, "ceilings": ceilings}}}))


@pytest.fixture
def results(tmp_path):
    folder = tmp_path / "results" / "pytest" / MACHINE
    old, new = [], []
    for k, shape in enumerate(SHAPES, 1):
        # eager's host time at the larger shape is noisy: ours's lead over it there must say so
        old += [_record(v, shape, d * k, h * k, noisy_host=(v == "eager" and k == 2)) for v, (d, h) in RUN_1.items()]
        new += [_record(v, shape, d * k, h * k) for v, (d, h) in RUN_2.items()]
    _run(folder / OLD, "2026-12-01T00:00:00+00:00", old)
    _run(folder / NEW, "2026-12-02T00:00:00+00:00", new)
    return tmp_path / "results"


def _rows(table: tables.Table) -> dict:
    """The summary's rows by (machine, op, dtype, time), each a dict by header."""
    return {tuple(r[:4]): dict(zip(table.headers, r)) for r in table.rows}


def test_each_time_ranks_every_variant_by_its_own_newest_record(results):
    table = report.summary(report.load(results).records)
    rows = _rows(table)
    assert sorted(rows) == [(MACHINE, "mlp", "bf16", "device"), (MACHINE, "mlp", "bf16", "host, back to back")]

    device = rows[MACHINE, "mlp", "bf16", "device"]
    # dualgemm is only in run 2, which has no eager: it is still compared, and wins
    assert device["fastest"] == "dualgemm, 2 of 2 shapes"
    # over ours's own newest record (run 2: 81 µs), not run 1's (80 µs, which gives 1.33×)
    assert device["its lead where it wins"] == "1.35× over ours"
    # over eager's newest record (run 1): 100 / 60
    assert device["its speedup over eager"] == "1.67×"
    assert device["of that run's measured copy or GEMM rate"].endswith("of bf16 GEMM 700 TFLOP/s")

    host = rows[MACHINE, "mlp", "bf16", "host, back to back"]
    assert host["fastest"] == "ours, 2 of 2 shapes"
    # 110 / 96 (run 2's ours; run 1's 95 gives 1.16×), noisy where eager's figure is
    assert host["its lead where it wins"] == "1.15× over eager (noisy)"
    assert host["its speedup over eager"] == "1.15× (noisy)"
    assert host["of that run's measured copy or GEMM rate"] == "—"  # the measured rates rate device time only
    # the rate at the largest shape from back-to-back host time: 4·t·d·h = 17.2 GFLOP in 192 µs
    assert host["its rate at the largest shape"] == "89.5 TFLOP/s, t1024-d1024-h4096"

    assert table.sources == [f"results/pytest/{MACHINE}/{OLD}", f"results/pytest/{MACHINE}/{NEW}"]


def test_a_time_no_run_recorded_is_said_to_be_missing(tmp_path):
    results = tmp_path / "results"
    folder = results / "pytest"
    # a GPU run from before back-to-back host time was recorded, and a CPU run (host time only)
    _run(folder / "gpu" / OLD, "2026-12-01T00:00:00+00:00",
         [_record(v, "t512-d1024-h4096", d, None) for v, (d, _) in RUN_1.items()], machine="gpu")
    _run(folder / "cpu" / OLD, "2026-12-01T00:00:00+00:00",
         [_record(v, "t512-d1024-h4096", None, None, single_us=us)
          for v, us in (("eager", 500.0), ("compiled", 300.0))],
         machine="cpu", ceilings={})
    table = report.summary(report.load(results).records)
    rows = _rows(table)
    assert rows["gpu", "mlp", "bf16", "device"]["fastest"] == "ours, 1 of 1 shapes"
    cpu = rows["cpu", "mlp", "bf16", tables.HOST_ONLY]  # ranked by one synchronised call, as it says
    assert cpu["fastest"] == "compiled, 1 of 1 shapes" and cpu["its speedup over eager"] == "1.67×"
    assert cpu["of that run's measured copy or GEMM rate"] == "no rate measured"
    for machine in ("gpu", "cpu"):
        missing = rows[machine, "mlp", "bf16", "host, back to back"]
        assert missing["fastest"] == "not recorded by any run"
        assert {missing[h] for h in table.headers[5:]} == {"—"}  # no figure stands in for it
    assert ("cpu", "mlp", "bf16", "device") not in rows


def test_the_results_page_and_the_report_show_both_rankings(results, tmp_path):
    folder = tmp_path / "docs" / "results"
    pages.write(results, folder)
    text = (folder / f"{MACHINE}.md").read_text()
    summary = text[text.index("## Summary"):text.index("\n## ", text.index("## Summary") + 1)]
    assert report.SUMMARY_NOTE in summary
    assert f"| {MACHINE} | mlp | bf16 | device | dualgemm, 2 of 2 shapes | 1.35× over ours |" in summary
    assert (f"| {MACHINE} | mlp | bf16 | host, back to back | ours, 2 of 2 shapes | 1.15× over eager (noisy) |"
            in summary)
    # the line under the table links both runs, the one dualgemm's figures come from included
    assert f"[`results/pytest/{MACHINE}/{NEW}`](../../results/pytest/{MACHINE}/{NEW})" in summary
    assert f"[`results/pytest/{MACHINE}/{OLD}`](../../results/pytest/{MACHINE}/{OLD})" in summary

    report.write(results, tmp_path / "report")
    page = (tmp_path / "report" / "report.html").read_text()
    html_summary = page[page.index("<h2 id='summary'>"):page.index("<h2", page.index("<h2 id='summary'>") + 1)]
    assert "<td>device</td><td>dualgemm, 2 of 2 shapes</td>" in html_summary
    assert "<td>host, back to back</td><td>ours, 2 of 2 shapes</td>" in html_summary


def test_a_paired_run_adds_a_ranking_by_ratios_that_drift_does_not_move(tmp_path):
    # One paired run: the host slowed down while compiled was timed, so its back-to-back median reads
    # slower than ours's; its rounds interleaved with eager's say it is the faster (0.70 against 0.85).
    results = tmp_path / "results"
    shape = "t512-d1024-h4096"
    records = [_record("eager", shape, 100.0, 110.0), _record("compiled", shape, 90.0, 150.0),
               _record("ours", shape, 80.0, 95.0)]
    for r, (ratio, samples) in zip(records[1:], ((0.70, [0.69, 0.70, 0.71]), (0.85, [0.5, 0.85, 1.2]))):
        r["extra_info"] |= {"host_time_back_to_back_vs_eager": ratio,
                            "host_time_back_to_back_vs_eager_samples": samples}
    _run(results / "pytest" / MACHINE / OLD, "2026-12-01T00:00:00+00:00", records)
    rows = _rows(report.summary(report.load(results).records))
    assert rows[MACHINE, "mlp", "bf16", "host, back to back"]["fastest"] == "ours, 1 of 1 shapes"
    paired = rows[MACHINE, "mlp", "bf16", report.PAIRED_NAME]
    assert paired["fastest"] == "compiled, 1 of 1 shapes"
    # 0.85 / 0.70; ours's ratios spread past tables.NOISY_SPREAD, so the lead is marked
    assert paired["its lead where it wins"] == "1.21× over ours (noisy)"
    assert paired["its speedup over eager"] == "1.43×"  # 1 / 0.70
    assert paired["of that run's measured copy or GEMM rate"] == "—"


def test_runs_without_pairs_get_no_paired_ranking(results):
    rows = _rows(report.summary(report.load(results).records))
    assert not any(key[3] == report.PAIRED_NAME for key in rows)


def test_paired_variants_from_two_runs_compare_by_their_ratios_alone(tmp_path):
    # run 1 paired compiled (0.70 of eager, eager at 110 µs); run 2, on a slower host stretch, paired
    # ours (0.80, eager at 200 µs). Each ratio times its own run's eager time would make ours 2.1×
    # slower; the ratios say 0.80 / 0.70.
    results = tmp_path / "results"
    shape = "t512-d1024-h4096"
    one = [_record("eager", shape, 100.0, 110.0), _record("compiled", shape, 90.0, 77.0)]
    two = [_record("eager", shape, 100.0, 200.0), _record("ours", shape, 80.0, 160.0)]
    one[1]["extra_info"]["host_time_back_to_back_vs_eager"] = 0.70
    two[1]["extra_info"]["host_time_back_to_back_vs_eager"] = 0.80
    _run(results / "pytest" / MACHINE / OLD, "2026-12-01T00:00:00+00:00", one)
    _run(results / "pytest" / MACHINE / NEW, "2026-12-02T00:00:00+00:00", two)
    paired = _rows(report.summary(report.load(results).records))[MACHINE, "mlp", "bf16", report.PAIRED_NAME]
    assert paired["fastest"] == "compiled, 1 of 1 shapes"
    assert paired["its lead where it wins"] == "1.14× over ours"
