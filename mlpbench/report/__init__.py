"""`mlpbench report`: read every result file once, compute the report's sections from what was read,
render them as markdown, one self-contained HTML page and CSV; never the other way round.

    mlpbench report --results results --output docs/report [--pages docs/results]

One module per step, each importing only those before it:

- `loading`: `load` reads results/: pytest-benchmark runs (pytest/<machine>/, each with its cases'
  outcomes) and ASV runs (asv/), with the records and noise the gate reads (codegen/, between-runs/).
  A file that cannot be read is skipped with a warning naming it.
- `ranking`, `section_tables`, `costs` and `plots` compute the summary, the other tables, the
  suite's own cost and the plots from what was read;
- `contents`: `sections` puts them in reading order, for every machine or, after `Loaded.of`, for
  one (the results pages, mlpbench/pages.py);
- `render`: `write` renders report.md, report.html and report.csv: the HTML embeds its plots and
  loads nothing remote, the markdown links the HTML for the plots, the CSV holds one row per
  measurement.

Everything callers use is importable from here.
"""

from .contents import Report, sections
from .costs import (COST_NOTE, NIGHT_STEPS, PHASE_COLUMNS, SLOWEST_CASES, case_costs, nightly_cost_table,
                    process_cost_table, run_cost_table, slowest_cases_table)
from .loading import (ASV_METRIC_ALIASES, MEASUREMENT_COLUMNS, METRICS_FROM_PYTEST, Loaded, asv_metric, label, load,
                      loaded, nights)
from .plots import (LINES_PER_AXES, history_plots, history_series, roofline_cases, roofline_plot, speedup_cases,
                    speedup_plot)
from .ranking import HOST_TIMES, PAIRED_NAME, SUMMARY_NOTE, SUMMARY_TIMES, SUSPECT_MARGIN, summary
from .render import STATIC, anchor, html_page, markdown, write
from .section_tables import (COMPILE_METRICS, asv_files_table, compile_table, gate_table, kernel_table,
                             not_timed_table, overhead_verdict, results_table, runs_table, step_table,
                             structure_table)

__all__ = [
    "ASV_METRIC_ALIASES", "COMPILE_METRICS", "COST_NOTE", "HOST_TIMES", "LINES_PER_AXES", "MEASUREMENT_COLUMNS",
    "METRICS_FROM_PYTEST", "NIGHT_STEPS", "PAIRED_NAME", "PHASE_COLUMNS", "SLOWEST_CASES", "STATIC", "SUMMARY_NOTE",
    "SUMMARY_TIMES", "SUSPECT_MARGIN", "Loaded", "Report", "anchor", "asv_files_table", "asv_metric", "case_costs",
    "compile_table", "gate_table", "history_plots", "history_series", "html_page", "kernel_table", "label", "load",
    "loaded", "markdown", "nightly_cost_table", "nights", "not_timed_table", "overhead_verdict", "process_cost_table",
    "results_table", "roofline_cases", "roofline_plot", "run_cost_table", "runs_table", "sections",
    "slowest_cases_table", "speedup_cases", "speedup_plot", "step_table", "structure_table", "summary", "write",
]
