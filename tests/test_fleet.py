"""The fleet view on a fabricated tidy DataFrame of two machines, one case lagging on one of them."""

import pandas as pd
import pytest

from mlpbench import fleet

GELU = ("gelu_mul", "ours", "bf16", "t8192-h3072")
MLP = ("mlp", "ours", "bf16", "t8192-d768-h3072")
LINEAR = ("linear", "eager", "bf16", "t8192-i4096-o4096")
WORK = {GELU: (0, 3 * 8192 * 3072 * 2), MLP: (6 * 8192 * 768 * 3072, 2 * (2 * 8192 * 768 + 3 * 768 * 3072)),
        LINEAR: (2 * 8192 * 4096 * 4096 + 8192 * 4096, 2 * (2 * 8192 * 4096 + 4096 * 4096 + 4096))}
RATES = {"h200": {"copy_bandwidth_Bps": 4.0e12, "gemm_bf16_flops": 800e12},
         "h100": {"copy_bandwidth_Bps": 3.0e12, "gemm_bf16_flops": 600e12}}


def _time_for(case, machine, fraction):
    """The device time at which `case` reaches `fraction` of `machine`'s measured rate."""
    flops, moved = WORK[case]
    c = RATES[machine]
    return flops / (fraction * c["gemm_bf16_flops"]) if flops else moved / (fraction * c["copy_bandwidth_Bps"])


def _row(source, machine, commit, date, case, value, with_work):
    flops, moved = WORK[case] if with_work else (None, None)
    metric = {"asv": "track_device_time", "pytest": "device_time_s"}[source]
    return {"source": source, "machine": machine, "commit": commit, "date": date,
            **dict(zip(("op", "variant", "dtype", "shape_id"), case)), "flops": flops, "bytes": moved,
            "metric": metric, "value": value}


def _tidy():
    """Rows as report.tidy makes them: ASV rows without work figures, over two commits; one
    pytest run per machine carrying FLOPs and bytes; unrelated metrics mixed in."""
    rows = []
    for machine in RATES:
        for case in WORK:
            # The MLP is at 25% of the measured rate on the h100 in the latest commit, 80% elsewhere.
            latest = 0.25 if (machine, case) == ("h100", MLP) else 0.8
            rows.append(_row("asv", machine, "c2", 2000, case, _time_for(case, machine, latest), False))
            rows.append(_row("asv", machine, "c1", 1000, case, _time_for(case, machine, 0.5), False))
            rows.append(_row("pytest", machine, None, None, case, _time_for(case, machine, 0.6), True))
            rows.append({**_row("asv", machine, "c2", 2000, case, 123.0, False), "metric": "time_host"})
    return pd.DataFrame(rows)


def test_a_case_lagging_on_one_machine_leads_and_names_it():
    wide = fleet.side_by_side(_tidy(), RATES)

    first = wide.index[0]
    assert first == ("asv", *MLP), wide.index.tolist()
    assert wide.loc[first, ("behind", "")] == "h100"
    assert wide.loc[first, ("spread", "")] == pytest.approx(0.8 / 0.25)
    # the latest commit's figure, against each machine's own measured rate
    assert wide.loc[("asv", *MLP), ("of_measured_rate", "h200")] == pytest.approx(0.8)
    assert wide.loc[("asv", *MLP), ("of_measured_rate", "h100")] == pytest.approx(0.25)
    assert wide.loc[("asv", *GELU), ("of_measured_rate", "h100")] == pytest.approx(0.8)
    assert wide.loc[("asv", *LINEAR), ("device_time_s", "h200")] == pytest.approx(_time_for(LINEAR, "h200", 0.8))
    for case in (GELU, LINEAR):
        assert wide.loc[("asv", *case), ("spread", "")] == pytest.approx(1.0)
    assert wide.loc[("pytest", *MLP), ("of_measured_rate", "h100")] == pytest.approx(0.6)
    assert len(wide) == 2 * len(WORK)

    text = fleet.markdown(wide)
    lines = text.splitlines()
    assert lines[0].startswith("| case | source | h100 | h200 | spread | behind |")
    assert lines[2].startswith(f"| {'/'.join(MLP)} | asv |") and "· 25%" in lines[2]
    assert lines[2].endswith("| 3.20× | h100 |"), lines[2]


def test_without_a_machine_rate_the_slower_machine_is_behind():
    wide = fleet.side_by_side(_tidy(), {"h200": RATES["h200"]})

    assert wide[("of_measured_rate", "h100")].isna().all()
    assert wide.loc[("asv", *GELU), ("of_measured_rate", "h200")] == pytest.approx(0.8)
    mlp = wide.loc[("asv", *MLP)]
    assert mlp[("behind", "")] == "h100"
    assert mlp[("spread", "")] == pytest.approx(_time_for(MLP, "h100", 0.25) / _time_for(MLP, "h200", 0.8))
    row = next(line for line in fleet.markdown(wide).splitlines() if line.startswith(f"| {'/'.join(MLP)} | asv |"))
    h100_cell = row.split(" | ")[2]
    assert h100_cell.endswith("µs") and "%" not in h100_cell, row


def test_a_case_on_one_machine_only_has_no_spread_and_nothing_behind():
    df = _tidy()
    df = df[~((df["machine"] == "h100") & (df["op"] == "gelu_mul"))]  # gelu_mul measured on the h200 only
    t = fleet.table(fleet.side_by_side(df, RATES))
    (row,) = [r for r in t.rows if r[0] == "/".join(GELU) and r[1] == "pytest"]
    assert row[t.headers.index("h100")] == "—" and row[-2:] == ["—", "—"]
    assert all(isinstance(c, str) for r in t.rows for c in r)
    assert "/".join(GELU) in t.markdown()  # every cell is text


def test_no_device_time_gives_an_empty_table():
    df = _tidy()
    assert fleet.side_by_side(df[df["metric"] == "time_host"], RATES).empty
    assert fleet.markdown(pd.DataFrame()) == ""


def test_the_report_sets_machines_side_by_side_when_it_has_several(tmp_path):
    # Two machines' ASV results of one commit: the second runs the gelu_mul cases at half the speed,
    # so the report's section puts those cases first and names it behind.
    from fixture_builders import asv_file, device_times, op_class_rows

    from mlpbench import report

    medians = {"gelu_mul/eager/bf16/t8192-h3072": 60e-6, "gelu_mul/ours/bf16/t8192-h3072": 36.5e-6,
               "mlp/eager/bf16/t8192-d768-h3072": 230e-6, "mlp/ours/bf16/t8192-d768-h3072": 200e-6,
               "linear/eager/bf16/t8192-i4096-o4096": 700e-6}
    for machine, slower in (("h200", 1.0), ("slowbox", 2.0)):
        mine = {c: m * (slower if c.startswith("gelu_mul/") else 1.0) for c, m in medians.items()}
        device_times(tmp_path / "asv", machine, "c" * 40, 1, mine, seed=1)
    # host time is no device time: a machine with only host time adds no column
    asv_file(tmp_path / "asv", "hostonly", "c" * 40, 1, op_class_rows("track_host_time", medians, kind="Host"))
    parts = report.sections(tmp_path).sections
    (across,) = [p for title, p in parts if title == "Across machines"]
    t = [part[1] for part in across if part[0] == "table"][0]
    assert t.headers[2:4] == ["h200", "slowbox"] and "hostonly" not in t.headers
    assert len(t.rows) == len(medians)
    assert [r[0].split("/")[0] for r in t.rows[:2]] == ["gelu_mul", "gelu_mul"]
    assert t.rows[0][-1] == "slowbox" and t.rows[0][-2] == "2.00×"
    assert all(r[-2] == "1.00×" for r in t.rows[2:]), t.rows


def _portability_frame(fractions: dict):
    """pytest rows only: each (machine, case) at the fraction of its roofline `fractions` gives, else 0.8."""
    rows = []
    for machine in RATES:
        for i, case in enumerate(CASES):
            f = fractions.get((machine, case), 0.8)
            rows.append({**_row("pytest", machine, None, None, GELU, _roof(case, machine) / f, False),
                         **dict(zip(("op", "variant", "dtype", "shape_id"), case)), "flops": 0, "bytes": MOVED[case]})
    return pd.DataFrame(rows)


# Eight memory-bound cases (one op, several shapes), so the class has a median and a spread.
CASES = [("gelu_mul", v, "bf16", f"t{t}-h3072") for v in ("ours", "eager") for t in (1024, 2048, 4096, 8192)]
MOVED = {c: 3 * int(c[3].split("-")[0][1:]) * 3072 * 2 for c in CASES}  # gate and up read, out written


def _roof(case, machine):
    return MOVED[case] / RATES[machine]["copy_bandwidth_Bps"]


def test_a_case_whose_ratio_the_measured_rates_explain_is_as_predicted_and_an_outlier_is_not_portable():
    slow = CASES[3]  # at 40% of its roofline on the h100, 80% on the h200: twice what the measured rates predict
    jitter = {("h100", c): 0.8 * (1 + 0.01 * (i % 3 - 1)) for i, c in enumerate(CASES) if c != slow}
    frame = fleet.portability(_portability_frame({("h100", slow): 0.4, **jitter}), RATES)
    by_case = frame.set_index("case")
    assert set(by_case["pair"]) == {"h100/h200"}
    assert by_case.loc["/".join(slow), "verdict"] == "not portable"
    assert by_case.loc["/".join(slow), "predicted"] == pytest.approx(4.0 / 3.0)
    assert by_case.loc["/".join(slow), "measured"] == pytest.approx(2 * 4.0 / 3.0)
    others = by_case.drop("/".join(slow))
    assert (others["verdict"] == "as predicted").all(), others[["departure", "allowance"]]
    assert frame.iloc[0]["case"] == "/".join(slow)  # the furthest from its prediction first
    assert "1 of 8 cases with a prediction are not portable" in fleet.portability_summary(frame)


def test_a_case_far_below_its_roofline_everywhere_is_latency_bound_not_judged():
    tiny = CASES[0]
    frame = fleet.portability(_portability_frame({("h100", tiny): 0.05, ("h200", tiny): 0.03}), RATES)
    row = frame.set_index("case").loc["/".join(tiny)]
    assert row["verdict"] == "latency-bound" and pd.isna(row["predicted"])


def test_noise_widens_the_allowance_and_says_whose_it_is():
    case = "/".join(CASES[1])
    frame = fleet.portability(_portability_frame({}), RATES, {"h200": {case: 0.5}})
    row = frame.set_index("case").loc[case]
    assert row["allowance"] == pytest.approx(0.5) and row["noise_from"] == "h200"
    assert frame.set_index("case").loc["/".join(CASES[2]), "noise_from"] == "floor only"
