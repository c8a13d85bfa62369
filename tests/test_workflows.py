import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
WORKFLOWS = ROOT / ".github" / "workflows"
MACHINES = ROOT / ".github" / "nightly-machines.json"


def _load(name):
    doc = yaml.safe_load((WORKFLOWS / name).read_text())
    doc["on"] = doc.pop(True, doc.get("on"))  # YAML 1.1 reads the key `on` as a boolean
    return doc


def _runs(job):
    return "\n".join(step.get("run", "") for step in job["steps"])


def test_nightly_runs_on_every_machine_of_the_fleet_on_schedule_and_by_hand():
    doc = _load("nightly.yml")
    assert "schedule" in doc["on"] and "workflow_dispatch" in doc["on"]
    jobs = doc["jobs"]
    assert ".github/nightly-machines.json" in _runs(jobs["machines"])
    assert jobs["machines"]["outputs"]["matrix"] == "${{ steps.read.outputs.matrix }}"
    job = jobs["nightly"]
    assert job["needs"] == "machines"
    assert job["strategy"]["matrix"] == "${{ fromJSON(needs.machines.outputs.matrix) }}"
    assert job["strategy"]["fail-fast"] is False
    assert job["runs-on"] == "${{ matrix.labels }}" and job["env"]["MACHINE"] == "${{ matrix.machine }}"
    assert job["steps"][0]["with"]["fetch-depth"] == 0
    assert 'mlpbench nightly --machine "$MACHINE"' in _runs(job)
    # main's results/ is the one place the history lives: the night's files are committed there
    # (results paths only, retried on a push race), and no other branch is read or written
    store = next(s for s in job["steps"] if "mlpbench store" in s.get("run", ""))
    assert store["if"] == "always()" and '--machine "$MACHINE" --remote origin --branch main' in store["run"]
    assert "git push" not in _runs(job) and "results:results" not in _runs(job)
    assert "git checkout results" not in _runs(job)
    uploads = {s["with"]["path"]: s for s in job["steps"] if "upload-artifact" in s.get("uses", "")}
    # the night's results and the codegen records the gate reads, even when a step failed
    assert uploads["results/asv\nresults/codegen.json\n"]["if"] == "always()"
    assert any(path.endswith("summary/${{ matrix.machine }}.md") for path in uploads)


def test_the_machines_job_emits_one_matrix_entry_per_line_of_the_machines_file(tmp_path):
    machines = json.loads(MACHINES.read_text())
    names = [m["machine"] for m in machines]
    assert names and len(set(names)) == len(names), names
    for m in machines:
        assert set(m) == {"machine", "labels"}, m
        assert re.fullmatch(r"[a-z0-9][a-z0-9_.-]*", m["machine"]), m
        assert {"self-hosted", "gpu"} <= set(m["labels"]), m
    if shutil.which("jq") is None:
        pytest.skip("jq (on GitHub's runners) is not installed here")
    output = tmp_path / "github_output"
    step = next(s for s in _load("nightly.yml")["jobs"]["machines"]["steps"] if s.get("id") == "read")
    subprocess.run(["bash", "-c", step["run"]], cwd=ROOT, env=os.environ | {"GITHUB_OUTPUT": str(output)}, check=True)
    key, value = output.read_text().strip().split("=", 1)
    assert key == "matrix" and json.loads(value) == {"include": machines}


def test_one_publish_job_after_every_machine_deploys_the_fleet_report():
    jobs = _load("nightly.yml")["jobs"]
    publish = jobs["publish"]
    assert publish["needs"] == "nightly" and publish["if"] == "always()"
    runs = _runs(publish)
    # main's tip after the machines pushed, not the commit the night started from
    checkout = next(s for s in publish["steps"] if "actions/checkout" in s.get("uses", ""))
    assert checkout["with"]["ref"] == "main" and checkout["with"]["fetch-depth"] == 0
    assert "git checkout results" not in runs and "bash scripts/setup.sh" in runs
    assert ".venv/bin/asv publish" in runs and "$GITHUB_STEP_SUMMARY" in runs
    # the report is built here, not committed: on Pages beside the dashboard, after asv publish writes it
    report = ".venv/bin/mlpbench report --results results --output results/html/report"
    assert report in runs and runs.index(".venv/bin/asv publish") < runs.index(report)
    download = next(s for s in publish["steps"] if "download-artifact" in s.get("uses", ""))
    assert download["with"]["pattern"] == "nightly-summary-*"
    assert any("deploy-pages" in s.get("uses", "") for s in publish["steps"])
    assert set(jobs) == {"machines", "nightly", "publish"}


def test_ci_runs_the_readme_test_command_on_pull_requests():
    doc = _load("ci.yml")
    assert "pull_request" in doc["on"]
    assert "bash .ci/run" in _runs(doc["jobs"]["tests"])
