"""Bad input met as a newcomer meets it, in the CLI: any git revision for `mlpbench check`, a results
folder with nothing readable, a valid value of another tier. Each exits 2 with one line naming it."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from fixture_builders import device_times, pytest_record, pytest_run
from mlpbench import cli, registry
from mlpbench.judging import gate

ROOT = Path(__file__).resolve().parent.parent
MEDIANS = {"gelu_mul/ours/bf16/t8192-h3072": 36.5e-6, "mlp/eager/bf16/t8192-d768-h3072": 220e-6}


def _git(repo, *args) -> str:
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(repo), *args],
                          capture_output=True, text=True, check=True).stdout.strip()


def _errors(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("mlpbench: error:")]


# --- 1. `mlpbench check --base/--head`: any git revision ------------------------------------------

@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    """A git repository of three commits, ASV results for the first two under results/asv."""
    repo = tmp_path_factory.mktemp("repo")
    _git(repo, "init", "-q")
    shas = []
    for k in range(3):
        _git(repo, "commit", "-q", "--allow-empty", "-m", f"commit {k}")
        shas.append(_git(repo, "rev-parse", "HEAD"))
    for k, sha in enumerate(shas[:2]):
        device_times(repo / "results" / "asv", "h200", sha, k + 1, MEDIANS, seed=k + 1)
    return repo, shas


def _check(*args, cwd):
    return subprocess.run([sys.executable, "-m", "mlpbench.cli", "check", *args], capture_output=True, text=True,
                          cwd=cwd, timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT)})


def test_check_takes_git_revisions_resolved_in_the_results_repository(repo, tmp_path):
    root, shas = repo
    # run from outside the repository: the revisions resolve where the results folder lives
    proc = _check("--results", str(root / "results" / "asv"), "--base", "HEAD~2", "--head", "HEAD~1", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "benchmarks compared" in proc.stdout


def test_check_still_takes_a_prefix_of_a_hash_in_the_results(repo, tmp_path):
    root, shas = repo
    proc = _check("--results", str(root / "results" / "asv"), "--base", shas[0][:7], "--head", shas[1][:7],
                  cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_a_revision_with_no_results_exits_2_naming_it_and_the_commits_found(repo, tmp_path):
    root, shas = repo
    proc = _check("--results", str(root / "results" / "asv"), "--base", "HEAD~1", "--head", "HEAD", cwd=tmp_path)
    assert proc.returncode == 2
    (line,) = _errors(proc.stderr)
    assert line == (f"mlpbench: error: revision 'HEAD' (commit {shas[2][:8]} in {root}) matches no commit in these "
                    f"results; commits found, newest first: {shas[1][:8]}, {shas[0][:8]}")
    assert "Traceback" not in proc.stderr


def test_a_revision_git_cannot_resolve_exits_2_naming_it(repo, tmp_path):
    root, shas = repo
    proc = _check("--results", str(root / "results" / "asv"), "--base", "no-such-branch", "--head", "HEAD~1",
                  cwd=tmp_path)
    assert proc.returncode == 2
    (line,) = _errors(proc.stderr)
    assert line.startswith("mlpbench: error: revision 'no-such-branch' matches no commit in these results and is "
                           f"not a revision git knows in {root}; commits found, newest first: {shas[1][:8]}")


def test_revision_errors_list_the_newest_commits_briefly(tmp_path):
    shas = [f"{k:x}" * 40 for k in range(1, 11)]
    for k, sha in enumerate(shas):
        device_times(tmp_path, "h200", sha[:40], k, MEDIANS, seed=k)
    with pytest.raises(gate.GateInputError) as info:
        gate.resolve(gate.load(tmp_path), "zzz")
    assert str(info.value).endswith(", ".join(s[:8] for s in reversed(shas[2:])) + ", … (10 in all)")


def test_check_help_says_any_git_revision():
    proc = subprocess.run([sys.executable, "-m", "mlpbench.cli", "check", "--help"], capture_output=True, text=True,
                          cwd=ROOT)
    assert "any git revision" in " ".join(proc.stdout.split())


# --- 2. a results folder with nothing readable ----------------------------------------------------

def test_report_over_an_empty_folder_exits_2_naming_it(tmp_path, capsys):
    assert cli.main(["report", "--results", str(tmp_path), "--output", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.splitlines() == [f"mlpbench: error: no readable results in {tmp_path}: expected pytest-benchmark "
                                f"files under {tmp_path / 'pytest'}/ (`mlpbench run`) or ASV result files under "
                                f"{tmp_path / 'asv'}/ (`asv run`)"]
    assert not (tmp_path / "out").exists()


def test_report_pages_over_an_empty_folder_exit_2(tmp_path, capsys):
    assert cli.main(["report", "--results", str(tmp_path), "--pages", str(tmp_path / "pages")]) == 2
    assert len(_errors(capsys.readouterr().err)) == 1
    assert not (tmp_path / "pages").exists()


def test_report_over_a_subfolder_of_results_names_the_folder_meant(tmp_path, capsys):
    device_times(tmp_path / "asv", "h200", "a" * 40, 1, MEDIANS, seed=1)
    pytest_run(tmp_path / "pytest", "h200", "20990101T000000Z", [pytest_record("gelu_mul/ours/bf16/t8192-h3072", 1e-5)])
    assert cli.main(["report", "--results", str(tmp_path / "pytest" / "h200"), "--output", str(tmp_path / "o")]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.endswith(f"--results takes the folder holding pytest/ and asv/: did you mean {tmp_path}?")


def test_report_over_corrupt_files_names_each_in_one_line_and_exits_2(tmp_path, capsys):
    bad_run = tmp_path / "pytest" / "h200" / "20990101T000000Z-quick-1.json"
    bad_asv = tmp_path / "asv" / "h200" / "aaaaaaaa-existing.json"
    for path, text in ((bad_run, "{ cut"), (bad_asv, "[1, 2]")):
        path.parent.mkdir(parents=True)
        path.write_text(text)
    assert cli.main(["report", "--results", str(tmp_path), "--output", str(tmp_path / "out")]) == 2
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 3
    assert lines[0].startswith(f"mlpbench: warning: skipping {bad_run}: not a readable pytest-benchmark file")
    assert lines[1].startswith(f"mlpbench: warning: skipping {bad_asv}: not a readable ASV result file")
    assert lines[2].startswith(f"mlpbench: error: no readable results in {tmp_path}")


def test_report_over_one_readable_file_beside_a_corrupt_one_still_writes(tmp_path, capsys):
    pytest_run(tmp_path / "pytest", "h200", "20990101T000000Z", [pytest_record("gelu_mul/ours/bf16/t8192-h3072", 1e-5)])
    (tmp_path / "pytest" / "h200" / "20990102T000000Z-quick-1.json").write_text("{ cut")
    assert cli.main(["report", "--results", str(tmp_path), "--output", str(tmp_path / "out")]) == 0
    err = capsys.readouterr().err
    assert "20990102T000000Z-quick-1.json" in err and "mlpbench: error" not in err
    assert (tmp_path / "out" / "report.md").is_file()


@pytest.mark.parametrize("args", [["--base", "a", "--head", "b"], ["--last", "3"]])
def test_check_over_an_empty_folder_exits_2_naming_it(tmp_path, capsys, args):
    assert cli.main(["check", "--results", str(tmp_path), *args]) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"mlpbench: error: --results {tmp_path}: no readable ASV result file; expected "
        "<machine>/<commit>-<env>.json files, as `asv run` writes under results/asv/"]


def test_check_over_an_empty_base_results_folder_exits_2_naming_it(tmp_path, capsys):
    device_times(tmp_path / "asv", "h200", "a" * 40, 1, MEDIANS, seed=1)
    (tmp_path / "empty").mkdir()
    argv = ["check", "--results", str(tmp_path / "asv"), "--base-results", str(tmp_path / "empty"),
            "--base", "a", "--head", "a"]
    assert cli.main(argv) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"mlpbench: error: --base-results {tmp_path / 'empty'}: no readable ASV result file")


# --- 3. a valid value of another tier -------------------------------------------------------------

@pytest.mark.parametrize("argv, message", [
    (["--tier", "quick", "--shape", "t8192-d768-h3072"],
     "shape t8192-d768-h3072 is in tiers standard and full, not quick; add --tier standard"),
    (["--tier", "standard", "--shape", "t4096-d3072-h24576"],
     "shape t4096-d3072-h24576 is in tier full, not standard; add --tier full"),
    (["--tier", "quick", "--variant", "maxautotune"], "variant maxautotune is in tier full, not quick; add --tier full"),
    (["--tier", "quick", "--op", "mlp_train", "--variant", "compiled"],
     "variant compiled of op mlp_train is in tiers standard and full, not quick; add --tier standard"),
    (["--tier", "quick", "--op", "linear", "--shape", "t64-d128-h512"], "op linear has no shape t64-d128-h512"),
])
def test_run_names_the_tier_a_valid_value_is_in(argv, message, capsys):
    assert cli.main(["run", *argv]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    tier = argv[1]
    assert line == f"mlpbench: error: the selection matches no case of tier {tier}: {message}"


def test_the_pytest_shape_option_names_the_tier_too():
    import pytest as _pytest

    from mlpbench import pytest_plugin

    class Config:
        options = {"--tier": "quick", "--op": None, "--variant": None, "--dtype": None,
                   "--shape": ["t8192-d768-h3072"], "--shard": None}

        def getoption(self, name):
            return self.options[name]

    with _pytest.raises(_pytest.UsageError, match="is in tiers standard and full, not quick; add --tier standard"):
        pytest_plugin.selected_cases(Config())
    Config.options["--tier"] = "standard"
    assert [c.shape.id for c in pytest_plugin.selected_cases(Config())][:1] == ["t8192-d768-h3072"]


def test_why_no_case_names_a_combination_no_case_has():
    assert registry.why_no_case("quick", variants=["ours"], shapes=["t1024-i32-o64"]) == (
        "the selection matches no case of tier quick: no case has all of variant ours; shape t1024-i32-o64")


def test_ab_names_the_tier_too():
    from types import SimpleNamespace

    from mlpbench.judging import ab

    args = SimpleNamespace(op=None, variant=None, dtype=None, shape=["t8192-d768-h3072"])
    with pytest.raises(ab.ABInputError, match="^at base: the selection matches no case of tier quick: shape "
                                              "t8192-d768-h3072 is in tiers standard and full, not quick; add --tier standard$"):
        ab._preflight(ROOT, "quick", args, "base")
