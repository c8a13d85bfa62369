"""Each repository's build/torch-universal is kernels_local/build.py's output from its build.toml and
torch-ext/, and stays so: one set of tests for every kernel repository built by that script."""

import importlib.util
import json
import shutil
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

import kernels
from kernels._rust import Metadata

KERNELS_LOCAL = Path(__file__).resolve().parents[1]
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def _load_build_script():
    spec = importlib.util.spec_from_file_location("kernels_local_build", KERNELS_LOCAL / "build.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


build = _load_build_script()

# Per repository: its function, the float64 reference, and a line of its kernel source to double
# the output with (and how often the source writes it).
REPOS = {
    "gelu_mul": (lambda g, u: F.gelu(g, approximate="tanh") * u, "y = gelu * u.to(tl.float32)\n", 2),
    "silu_mul": (lambda g, u: F.silu(g) * u, "y = g * s * u\n", 1),
}
repos = pytest.mark.parametrize("name", sorted(REPOS))


def _copy_sources(name: str, dest: Path) -> Path:
    """A kernel repository at dest with `name`'s build.toml and torch-ext/ (no build/)."""
    dest.mkdir()
    shutil.copy(KERNELS_LOCAL / name / "build.toml", dest / "build.toml")
    shutil.copytree(KERNELS_LOCAL / name / "torch-ext", dest / "torch-ext",
                    ignore=shutil.ignore_patterns("__pycache__"))
    return dest


def test_every_kernel_repository_is_tested_here():
    assert sorted(REPOS) == sorted(p.parent.name for p in KERNELS_LOCAL.glob("*/build.toml"))


@repos
def test_committed_build_is_current(name):
    diffs = build.differences(KERNELS_LOCAL / name)
    assert diffs == [], f"build/torch-universal is stale; run: python kernels_local/build.py {name}\n" + "\n".join(diffs)
    assert build.main([name, "--check"]) == 0


@repos
def test_check_reports_each_kind_of_difference(name, tmp_path):
    repo = _copy_sources(name, tmp_path / name)
    variant = repo / "build" / "torch-universal"
    build.build(repo, variant)
    assert build.differences(repo) == []

    with (repo / "torch-ext" / name / f"_{name}.py").open("a") as f:
        f.write("# edited\n")
    (variant / "layers.py").unlink()
    (variant / "stray.py").write_text("")
    assert build.differences(repo) == [
        "missing: layers.py",
        "not produced by the build: stray.py",
        f"differs: _{name}.py",
        "differs: metadata.json",  # the id follows the sources
    ]


@repos
def test_metadata_follows_build_toml(name):
    general = build.read_config(KERNELS_LOCAL / name)
    path = KERNELS_LOCAL / name / "build" / "torch-universal" / "metadata.json"
    written = json.loads(path.read_text())
    assert written["name"] == general["name"] == name.replace("_", "-")
    assert written["version"] == general["version"]
    assert written["license"] == general["license"]
    assert written["backend"] == {"type": general["backends"][0]}
    assert written["python-depends"] == []
    assert written["id"].startswith(f"_{name}_") and written["id"].isidentifier()
    # kernels itself reads it.
    parsed = Metadata.read_from_file(path)
    assert (str(parsed.name), parsed.id, parsed.version) == (general["name"], written["id"], general["version"])


@repos
@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda t: t.replace('license = "Apache-2.0"\n', ""), "license is required"),
        (lambda t: t.replace('backends = ["cuda"]', 'backends = ["cuda", "rocm"]'), "must name exactly one backend"),
        (lambda t: t.replace("[torch-noarch]", '[torch]\nsrc = ["torch-ext/torch_binding.cpp"]'), r"only a \[torch-noarch\] kernel"),
        (lambda t: t.replace("version = 1", 'version = "1"'), "version='1' must be an integer"),
        (lambda t: t.replace('name = "', 'name = "Bad_'), "name='Bad_.*' must match"),
    ],
)
def test_bad_build_toml_is_rejected(name, tmp_path, edit, message):
    repo = _copy_sources(name, tmp_path / name)
    toml = repo / "build.toml"
    edited = edit(toml.read_text())
    assert edited != toml.read_text()
    toml.write_text(edited)
    with pytest.raises(build.BuildError, match=message):
        build.build(repo, repo / "build" / "torch-universal")


@repos
def test_same_build_from_another_path(name, tmp_path):
    """A copy of a build (another path, the same id) loads beside it and shares its ops."""
    first = kernels.get_local_kernel(KERNELS_LOCAL / name)
    copy = tmp_path / name
    shutil.copytree(KERNELS_LOCAL / name / "build", copy / "build", ignore=shutil.ignore_patterns("__pycache__"))
    second = kernels.get_local_kernel(copy)
    assert second is not first and second.__name__ == first.__name__
    # Python caches modules by name, so the copy's implementation module is the first one's.
    assert getattr(second, name) is getattr(first, name)
    g, u = torch.randn(3, 40, device=DEVICE), torch.randn(3, 40, device=DEVICE)
    reference = REPOS[name][0]
    torch.testing.assert_close(getattr(second, name)(g, u).double(), reference(g.double(), u.double()),
                               rtol=1e-5, atol=1e-5)


@repos
def test_two_versions_side_by_side(name, tmp_path):
    """Edited sources get another id, hence their own op namespace: loading them does not
    replace this build's ops (torch.library lets a later definition of a name win)."""
    reference, line, count = REPOS[name]
    current = kernels.get_local_kernel(KERNELS_LOCAL / name)
    repo = _copy_sources(name, tmp_path / name)
    source = repo / "torch-ext" / name / f"_{name}.py"
    text = source.read_text()
    assert text.count(line) == count
    source.write_text(text.replace(line, line.replace("y = ", "y = 2.0 * ")))
    build.build(repo, repo / "build" / "torch-universal")
    edited = kernels.get_local_kernel(repo)
    assert edited.__name__ != current.__name__

    g, u = torch.randn(3, 40, device=DEVICE), torch.randn(3, 40, device=DEVICE)
    expected = reference(g.double(), u.double())
    torch.testing.assert_close(getattr(current, name)(g, u).double(), expected, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(getattr(edited, name)(g, u).double(), 2 * expected, rtol=1e-5, atol=1e-5)
