"""build/torch-universal is kernels_local/build.py's output from build.toml and torch-ext/, and stays so."""

import importlib.util
import json
import shutil
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

import kernels
from kernels._rust import Metadata

REPO = Path(__file__).resolve().parents[1]
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def _load_build_script():
    spec = importlib.util.spec_from_file_location("kernels_local_build", REPO.parent / "build.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


build = _load_build_script()


def _copy_sources(dest: Path) -> Path:
    """A kernel repository at dest with this one's build.toml and torch-ext/ (no build/)."""
    dest.mkdir()
    shutil.copy(REPO / "build.toml", dest / "build.toml")
    shutil.copytree(REPO / "torch-ext", dest / "torch-ext", ignore=shutil.ignore_patterns("__pycache__"))
    return dest


def test_committed_build_is_current():
    diffs = build.differences(REPO)
    assert diffs == [], "build/torch-universal is stale; run: python kernels_local/build.py gelu_mul\n" + "\n".join(diffs)
    assert build.main(["gelu_mul", "--check"]) == 0


def test_check_reports_each_kind_of_difference(tmp_path):
    repo = _copy_sources(tmp_path / "gelu_mul")
    variant = repo / "build" / "torch-universal"
    build.build(repo, variant)
    assert build.differences(repo) == []

    with (repo / "torch-ext" / "gelu_mul" / "_gelu_mul.py").open("a") as f:
        f.write("# edited\n")
    (variant / "layers.py").unlink()
    (variant / "stray.py").write_text("")
    assert build.differences(repo) == [
        "missing: layers.py",
        "not produced by the build: stray.py",
        "differs: _gelu_mul.py",
        "differs: metadata.json",  # the id follows the sources
    ]


def test_metadata_follows_build_toml():
    general = build.read_config(REPO)
    path = REPO / "build" / "torch-universal" / "metadata.json"
    written = json.loads(path.read_text())
    assert written["name"] == general["name"] == "gelu-mul"
    assert written["version"] == general["version"]
    assert written["license"] == general["license"]
    assert written["backend"] == {"type": general["backends"][0]}
    assert written["python-depends"] == []
    assert written["id"].startswith("_gelu_mul_") and written["id"].isidentifier()
    # kernels itself reads it.
    parsed = Metadata.read_from_file(path)
    assert (str(parsed.name), parsed.id, parsed.version) == ("gelu-mul", written["id"], general["version"])


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda t: t.replace('license = "Apache-2.0"\n', ""), "license is required"),
        (lambda t: t.replace('backends = ["cuda"]', 'backends = ["cuda", "rocm"]'), "must name exactly one backend"),
        (lambda t: t.replace("[torch-noarch]", '[torch]\nsrc = ["torch-ext/torch_binding.cpp"]'), r"only a \[torch-noarch\] kernel"),
        (lambda t: t.replace('name = "gelu-mul"', 'name = "Gelu_Mul"'), "name='Gelu_Mul' must match"),
        (lambda t: t.replace("version = 1", 'version = "1"'), "version='1' must be an integer"),
    ],
)
def test_bad_build_toml_is_rejected(tmp_path, edit, message):
    repo = _copy_sources(tmp_path / "gelu_mul")
    toml = repo / "build.toml"
    edited = edit(toml.read_text())
    assert edited != toml.read_text()
    toml.write_text(edited)
    with pytest.raises(build.BuildError, match=message):
        build.build(repo, repo / "build" / "torch-universal")


def test_same_build_from_another_path(tmp_path):
    """A copy of this build (another path, the same id) loads beside it and shares its ops."""
    first = kernels.get_local_kernel(REPO)
    copy = tmp_path / "gelu_mul"
    shutil.copytree(REPO / "build", copy / "build", ignore=shutil.ignore_patterns("__pycache__"))
    second = kernels.get_local_kernel(copy)
    assert second is not first and second.__name__ == first.__name__
    # Python caches modules by name, so the copy's implementation module is the first one's.
    assert second.gelu_mul is first.gelu_mul
    g = torch.randn(3, 40, device=DEVICE)
    u = torch.randn(3, 40, device=DEVICE)
    expected = F.gelu(g.double(), approximate="tanh") * u.double()
    torch.testing.assert_close(second.gelu_mul(g, u).double(), expected, rtol=1e-5, atol=1e-5)


def test_two_versions_side_by_side(tmp_path):
    """Edited sources get another id, hence their own op namespace: loading them does not
    replace this build's ops (torch.library lets a later definition of a name win)."""
    current = kernels.get_local_kernel(REPO)
    repo = _copy_sources(tmp_path / "gelu_mul")
    source = repo / "torch-ext" / "gelu_mul" / "_gelu_mul.py"
    text = source.read_text()
    # The product is written twice: in the full-tile branch and the ragged-edge one.
    assert text.count("y = gelu * u.to(tl.float32)\n") == 2
    source.write_text(text.replace("y = gelu * u.to(tl.float32)\n", "y = 2.0 * gelu * u.to(tl.float32)\n"))
    build.build(repo, repo / "build" / "torch-universal")
    edited = kernels.get_local_kernel(repo)
    assert edited.__name__ != current.__name__

    g = torch.randn(3, 40, device=DEVICE)
    u = torch.randn(3, 40, device=DEVICE)
    expected = F.gelu(g.double(), approximate="tanh") * u.double()
    torch.testing.assert_close(current.gelu_mul(g, u).double(), expected, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(edited.gelu_mul(g, u).double(), 2 * expected, rtol=1e-5, atol=1e-5)
