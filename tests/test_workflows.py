from pathlib import Path

import yaml

WORKFLOWS = Path(__file__).resolve().parent.parent / ".github" / "workflows"


def _load(name):
    doc = yaml.safe_load((WORKFLOWS / name).read_text())
    doc["on"] = doc.pop(True, doc.get("on"))  # YAML 1.1 reads the key `on` as a boolean
    return doc


def _runs(job):
    return "\n".join(step.get("run", "") for step in job["steps"])


def test_nightly_runs_on_a_gpu_runner_on_schedule_and_by_hand():
    doc = _load("nightly.yml")
    assert "schedule" in doc["on"] and "workflow_dispatch" in doc["on"]
    job = doc["jobs"]["nightly"]
    assert {"self-hosted", "gpu"} <= set(job["runs-on"])
    assert job["steps"][0]["with"]["fetch-depth"] == 0
    assert "mlpbench nightly" in _runs(job) and "git push origin results" in _runs(job)
    assert any("deploy-pages" in s.get("uses", "") for s in doc["jobs"]["deploy"]["steps"])


def test_ci_runs_the_readme_test_command_on_pull_requests():
    doc = _load("ci.yml")
    assert "pull_request" in doc["on"]
    assert "bash .ci/run" in _runs(doc["jobs"]["tests"])
