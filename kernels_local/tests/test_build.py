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

def _step_inputs():
    return torch.randn(3, 40, device=DEVICE), torch.randn(3, 40, device=DEVICE)


def _gate_up_inputs():  # float32: the unfused path, whose act·mul kernel shares _act with the fused one
    return (torch.randn(64, 32, device=DEVICE), torch.randn(48, 32, device=DEVICE) / 6,
            torch.randn(48, 32, device=DEVICE) / 6)


def _gate_up_reference(x, wg, wu):
    return F.gelu(x @ wg.T, approximate="tanh") * (x @ wu.T)


# Per repository: its function's name, inputs for it, the float64 reference, and a line of its
# kernel source to double the output with (and how often the source writes it).
REPOS = {
    "gelu_mul": ("gelu_mul", _step_inputs, lambda g, u: F.gelu(g, approximate="tanh") * u,
                 "y = gelu * u.to(tl.float32)\n", 2),
    "silu_mul": ("silu_mul", _step_inputs, lambda g, u: F.silu(g) * u, "y = g * s * u\n", 1),
    "gated_dual_gemm": ("gate_up_act_mul", _gate_up_inputs, _gate_up_reference,
                        "a = g / (1.0 + tl.exp(-y))\n", 1),
}
repos = pytest.mark.parametrize("name", sorted(REPOS))


def _copy_sources(name: str, dest: Path) -> Path:
    """A kernel repository at dest with `name`'s build.toml and torch-ext/ (no build/)."""
    dest.mkdir()
    shutil.copy(KERNELS_LOCAL / name / "build.toml", dest / "build.toml")
    shutil.copytree(KERNELS_LOCAL / name / "torch-ext", dest / "torch-ext",
                    ignore=shutil.ignore_patterns("__pycache__"))
    return dest


def _source(repo: Path, name: str) -> Path:
    """The kernel's implementation module: torch-ext/<name>/_<something>.py holding its Triton code."""
    found = [p for p in sorted((repo / "torch-ext" / name).glob("_*.py"))
             if p.name not in ("__init__.py", "_fast_launch.py")]
    assert len(found) == 1, found
    return found[0]


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

    with _source(repo, name).open("a") as f:
        f.write("# edited\n")
    (variant / "layers.py").unlink()
    (variant / "stray.py").write_text("")
    assert build.differences(repo) == [
        "missing: layers.py",
        "not produced by the build: stray.py",
        f"differs: {_source(repo, name).name}",
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
    function, make_inputs, reference, _, _ = REPOS[name]
    assert getattr(second, function) is getattr(first, function)
    inputs = make_inputs()
    torch.testing.assert_close(getattr(second, function)(*inputs).double(),
                               reference(*(t.double() for t in inputs)), rtol=1e-5, atol=1e-5)


@repos
def test_two_versions_side_by_side(name, tmp_path):
    """Edited sources get another id, hence their own op namespace: loading them does not
    replace this build's ops (torch.library lets a later definition of a name win)."""
    function, make_inputs, reference, line, count = REPOS[name]
    current = kernels.get_local_kernel(KERNELS_LOCAL / name)
    repo = _copy_sources(name, tmp_path / name)
    source = _source(repo, name)
    text = source.read_text()
    assert text.count(line) == count
    source.write_text(text.replace(line, line.replace(" = ", " = 2.0 * ", 1)))
    build.build(repo, repo / "build" / "torch-universal")
    edited = kernels.get_local_kernel(repo)
    assert edited.__name__ != current.__name__

    inputs = make_inputs()
    expected = reference(*(t.double() for t in inputs))
    torch.testing.assert_close(getattr(current, function)(*inputs).double(), expected, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(getattr(edited, function)(*inputs).double(), 2 * expected, rtol=1e-5, atol=1e-5)


def test_the_launchers_are_one_file():
    """Each kernel repository is loaded as a package of its own, so each carries _fast_launch.py;
    the copies stay the same file."""
    copies = sorted(KERNELS_LOCAL.glob("*/torch-ext/*/_fast_launch.py"))
    assert len(copies) == 3, copies
    assert len({p.read_bytes() for p in copies}) == 1, [str(p) for p in copies]
