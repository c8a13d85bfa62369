"""A kernel repository's loadable variant, build/torch-universal, is written from its build.toml and
torch-ext/ (mlpbench/kernel_build.py) into a cache folder keyed by its content, which mlpbench loads:
nothing built is committed. One set of tests for every kernel repository built that way."""

import ast
import importlib.util
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

import kernels
from kernels._rust import Metadata

from mlpbench import kernel_build, sources

KERNELS_LOCAL = Path(__file__).resolve().parents[1]
ROOT = KERNELS_LOCAL.parent
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
VARIANT = Path("build") / "torch-universal"

# kernels_local/build.py itself, by its path: kernels_local is no package to import it from.
_spec = importlib.util.spec_from_file_location("kernels_local_build", KERNELS_LOCAL / "build.py")
build_script = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(build_script)


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
    """The kernel's implementation module: the torch-ext/<name>/_<something>.py holding its Triton code
    and the line REPOS names (gated_dual_gemm has a second one, _fp8.py, which imports it)."""
    found = [p for p in sorted((repo / "torch-ext" / name).glob("_*.py"))
             if p.name != "__init__.py" and p.name not in build_script.SHARED and REPOS[name][3] in p.read_text()]
    assert len(found) == 1, found
    return found[0]


def test_every_kernel_repository_is_tested_here():
    assert sorted(REPOS) == sorted(p.parent.name for p in KERNELS_LOCAL.glob("*/build.toml"))


@repos
def test_materialised_variant_is_torch_ext_plus_metadata(name, tmp_path):
    repo = kernel_build.materialise(KERNELS_LOCAL / name, tmp_path)
    assert repo == tmp_path / f"{name}-{kernel_build.cache_key(KERNELS_LOCAL / name)}"
    variant = repo / VARIANT
    package = KERNELS_LOCAL / name / "torch-ext" / name
    sources_ = {p.relative_to(package).as_posix() for p in package.rglob("*.py") if "__pycache__" not in p.parts}
    assert kernel_build._tree(variant) == sources_ | {"metadata.json"}
    for rel in sources_:
        assert (variant / rel).read_bytes() == (package / rel).read_bytes(), rel

    general = kernel_build.read_config(KERNELS_LOCAL / name)
    written = json.loads((variant / "metadata.json").read_text())
    assert written["name"] == general["name"] == name.replace("_", "-")
    assert written["version"] == general["version"]
    assert written["license"] == general["license"]
    assert written["backend"] == {"type": general["backends"][0]}
    assert written["python-depends"] == []
    assert written["id"].startswith(f"_{name}_") and written["id"].isidentifier()
    # kernels itself reads it.
    parsed = Metadata.read_from_file(variant / "metadata.json")
    assert (str(parsed.name), parsed.id, parsed.version) == (general["name"], written["id"], general["version"])


def test_materialise_reuses_a_matching_copy_and_rewrites_an_edited_one(tmp_path):
    kernel_dir = KERNELS_LOCAL / "gelu_mul"
    repo = kernel_build.materialise(kernel_dir, tmp_path)
    init = repo / VARIANT / "__init__.py"
    inode = init.stat().st_ino
    (repo / VARIANT / "__pycache__").mkdir()  # what importing it leaves there
    assert kernel_build.materialise(kernel_dir, tmp_path) == repo
    assert init.stat().st_ino == inode  # not written again

    init.write_text("raise RuntimeError('edited by hand')\n")
    (repo / VARIANT / "stray.py").write_text("")
    assert kernel_build.materialise(kernel_dir, tmp_path) == repo
    assert kernel_build.differences(kernel_dir, repo / VARIANT) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == [repo.name]  # no temporary folder left


def test_materialise_from_many_threads_at_once(tmp_path):
    """Writers racing on one cache folder (ASV's processes, pytest-xdist's; threads here) each get a whole copy."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(8) as pool:
        repos = list(pool.map(lambda _: kernel_build.materialise(KERNELS_LOCAL / "gelu_mul", tmp_path), range(16)))
    assert len(set(repos)) == 1
    assert kernel_build.differences(KERNELS_LOCAL / "gelu_mul", repos[0] / VARIANT) == []
    assert [p.name for p in tmp_path.iterdir()] == [repos[0].name]


@repos
def test_changed_sources_get_a_new_cache_folder(name, tmp_path):
    repo = _copy_sources(name, tmp_path / name)
    cache = tmp_path / "cache"
    first = kernel_build.materialise(repo, cache)

    toml = repo / "build.toml"
    toml.write_text(toml.read_text() + "# a comment changes nothing built\n")
    assert kernel_build.materialise(repo, cache) == first

    with _source(repo, name).open("a") as f:
        f.write("# edited\n")
    second = kernel_build.materialise(repo, cache)
    assert second != first and (first / VARIANT).is_dir()  # the old one stays for whoever loaded it
    ids = [json.loads((r / VARIANT / "metadata.json").read_text())["id"] for r in (first, second)]
    assert ids[0] != ids[1]

    toml.write_text(toml.read_text().replace("version = 1", "version = 2"))
    third = kernel_build.materialise(repo, cache)
    assert third not in (first, second)
    assert json.loads((third / VARIANT / "metadata.json").read_text())["version"] == 2


def test_cache_folder_falls_back_to_a_private_temp_folder(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/is/ignored")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert kernel_build.cache_dirs()[0] == tmp_path / "home" / ".cache" / "mlpbench" / "kernels"

    not_a_folder = tmp_path / "file"
    not_a_folder.write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(not_a_folder))
    repo = kernel_build.materialise(KERNELS_LOCAL / "silu_mul")
    fallback = kernel_build.cache_dirs()[1]
    assert repo.parent == fallback and fallback.is_relative_to(tmp_path / "tmp")
    assert stat.S_IMODE(fallback.stat().st_mode) == 0o700

    # A folder others can write is refused: the code in it would be imported.
    shutil.rmtree(fallback)
    fallback.mkdir(mode=0o777)
    fallback.chmod(0o777)
    with pytest.raises(PermissionError, match="another user"):
        kernel_build.materialise(KERNELS_LOCAL / "silu_mul")

    # So is a link, wherever it points: another user could have made it before us.
    shutil.rmtree(fallback)
    (tmp_path / "elsewhere").mkdir(mode=0o700)
    fallback.symlink_to(tmp_path / "elsewhere")
    with pytest.raises(PermissionError, match="a link"):
        kernel_build.materialise(KERNELS_LOCAL / "silu_mul")


def test_sources_load_in_a_fresh_process_with_an_empty_cache(tmp_path):
    """What a fresh clone, an editable install or ASV's wheel does on first use: build, then load."""
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache"), "HF_HUB_OFFLINE": "1"}
    if DEVICE == "cpu":
        env["TRITON_INTERPRET"] = "1"
    code = textwrap.dedent(f"""
        import torch, torch.nn.functional as F
        from mlpbench import sources
        g, u = torch.randn(3, 40, device={DEVICE!r}), torch.randn(3, 40, device={DEVICE!r})
        gelu, silu = sources.local_kernel("gelu_mul"), sources.local_kernel("silu_mul")
        torch.testing.assert_close(gelu.gelu_mul(g, u), F.gelu(g, approximate="tanh") * u, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(silu.silu_mul(g, u), F.silu(g) * u, rtol=1e-5, atol=1e-5)
        for name in ("gelu_mul", "silu_mul", "gated_dual_gemm"):
            print(name, sources.local_kernel(name).__file__)
    """)
    res = subprocess.run([sys.executable, "-c", code], env=env, cwd=tmp_path, capture_output=True, text=True,
                         timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    loaded = dict(line.split(" ", 1) for line in res.stdout.splitlines() if line.split(" ")[0] in REPOS)
    for name, file in loaded.items():
        key = kernel_build.cache_key(KERNELS_LOCAL / name)
        assert Path(file) == tmp_path / "cache" / "mlpbench" / "kernels" / f"{name}-{key}" / VARIANT / "__init__.py"
    assert sorted(loaded) == sorted(REPOS)


@repos
def test_the_wheel_ships_the_sources(name):
    """pyproject.toml's package-data carries what the variant is built from, and no build/."""
    with (ROOT / "pyproject.toml").open("rb") as f:
        setuptools = tomllib.load(f)["tool"]["setuptools"]
    patterns = setuptools["package-data"][f"kernels_local.{name}"]
    shipped = {p.relative_to(KERNELS_LOCAL / name).as_posix()
               for pattern in patterns for p in (KERNELS_LOCAL / name).glob(pattern) if "__pycache__" not in p.parts}
    needed = {f"torch-ext/{name}/{rel}" for rel in kernel_build.variant_files(KERNELS_LOCAL / name)
              if rel != "metadata.json"}
    assert needed | {"build.toml"} <= shipped
    assert not any(p.startswith("build/") for p in shipped)
    assert "kernels_local.*.build*" in setuptools["packages"]["find"]["exclude"]


@repos
def test_check_reports_each_kind_of_difference(name, tmp_path):
    repo = _copy_sources(name, tmp_path / name)
    variant = repo / VARIANT
    kernel_build.build(repo, variant)
    assert kernel_build.differences(repo) == []

    with _source(repo, name).open("a") as f:
        f.write("# edited\n")
    (variant / "layers.py").unlink()
    (variant / "stray.py").write_text("")
    assert kernel_build.differences(repo) == [
        "missing: layers.py",
        "not produced by the build: stray.py",
        f"differs: {_source(repo, name).name}",
        "differs: metadata.json",  # the id follows the sources
    ]


def test_build_command_writes_and_checks_a_build_folder(tmp_path):
    repo = _copy_sources("silu_mul", tmp_path / "silu_mul")
    command = [sys.executable, str(KERNELS_LOCAL / "build.py"), str(repo)]
    # Run from another folder: the script imports the mlpbench beside it.
    run = lambda *extra: subprocess.run([*command, *extra], cwd=tmp_path, capture_output=True,  # noqa: E731
                                        text=True, timeout=60)
    missing = run("--check")
    assert missing.returncode == 1 and "missing: metadata.json" in missing.stdout
    wrote = run()
    assert wrote.returncode == 0, wrote.stderr
    assert kernel_build.differences(repo) == []
    assert run("--check").returncode == 0
    with _source(repo, "silu_mul").open("a") as f:
        f.write("# edited\n")
    assert run("--check").returncode == 1


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
    with pytest.raises(kernel_build.BuildError, match=message):
        kernel_build.build(repo, repo / "build" / "torch-universal")


@repos
def test_same_build_from_another_path(name, tmp_path):
    """A copy of a build (another path, the same id) loads beside it and shares its ops."""
    built = sources.kernel_repo(name)
    first = kernels.get_local_kernel(built)
    copy = tmp_path / name
    shutil.copytree(built / "build", copy / "build", ignore=shutil.ignore_patterns("__pycache__"))
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
    current = kernels.get_local_kernel(sources.kernel_repo(name))
    repo = _copy_sources(name, tmp_path / name)
    source = _source(repo, name)
    text = source.read_text()
    assert text.count(line) == count
    source.write_text(text.replace(line, line.replace(" = ", " = 2.0 * ", 1)))
    edited = kernels.get_local_kernel(kernel_build.materialise(repo, tmp_path / "cache"))
    assert edited.__name__ != current.__name__

    inputs = make_inputs()
    expected = reference(*(t.double() for t in inputs))
    torch.testing.assert_close(getattr(current, function)(*inputs).double(), expected, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(getattr(edited, function)(*inputs).double(), 2 * expected, rtol=1e-5, atol=1e-5)


@repos
def test_each_shared_file_is_the_copy_build_py_writes(name):
    """Each repository is loaded, and published, as a package of its own, so each carries a copy of
    every file in kernels_local/common/; the copy committed is the one build.py writes from it."""
    stale = build_script.stale_copies(KERNELS_LOCAL / name)
    assert not stale, (f"{', '.join(str(p.relative_to(ROOT)) for p in stale)}: missing, or not what "
                       f"kernels_local/common/ makes; run {build_script.REGENERATE}")


@pytest.mark.parametrize("shared", build_script.SHARED)
def test_a_copy_is_a_header_then_its_source(shared):
    source = KERNELS_LOCAL / "common" / shared
    repo = KERNELS_LOCAL / "gelu_mul"
    copy = build_script.shared_copies(repo)[repo / "torch-ext" / "gelu_mul" / shared]
    header = copy[:len(copy) - len(source.read_bytes())].decode()
    assert copy.endswith(source.read_bytes()) and header.startswith("# Generated from ")
    assert f"kernels_local/common/{shared}" in header and build_script.REGENERATE in header
    assert all(line.startswith("#") for line in header.splitlines())
    # Comments only: the module docstring is still the copy's first statement.
    assert ast.get_docstring(ast.parse(copy)) == ast.get_docstring(ast.parse(source.read_bytes()))


def test_check_names_a_stale_copy_and_the_build_writes_it_again(tmp_path, monkeypatch, capsys):
    """On a kernels_local/ of its own: a copy edited by hand, then its source edited."""
    shutil.copytree(KERNELS_LOCAL / "common", tmp_path / "common", ignore=shutil.ignore_patterns("__pycache__"))
    repo = _copy_sources("silu_mul", tmp_path / "silu_mul")
    monkeypatch.setattr(build_script, "KERNELS_LOCAL", tmp_path)
    copy = repo / "torch-ext" / "silu_mul" / "_fast_launch.py"
    assert build_script.main(["silu_mul"]) == 0
    assert build_script.main(["silu_mul", "--check"]) == 0

    copy.write_text(copy.read_text().replace("MAX_KERNELS = 256", "MAX_KERNELS = 1"))
    capsys.readouterr()
    assert build_script.main(["silu_mul", "--check"]) == 1
    out = capsys.readouterr().out
    assert "silu_mul/torch-ext/silu_mul/_fast_launch.py: missing, or not what kernels_local/common/" in out
    assert "run: python kernels_local/build.py silu_mul" in out
    assert build_script.main(["silu_mul"]) == 0
    assert build_script.stale_copies(repo) == [] and "MAX_KERNELS = 256" in copy.read_text()
    assert build_script.main(["silu_mul", "--check"]) == 0

    source = tmp_path / "common" / "_fast_launch.py"
    source.write_text(source.read_text() + "# edited\n")
    assert build_script.stale_copies(repo) == [copy]
    copy.unlink()
    assert build_script.stale_copies(repo) == [copy]
    assert build_script.main(["silu_mul"]) == 0
    assert copy.read_text().endswith("# edited\n")


def test_a_repository_elsewhere_keeps_its_own_copies(tmp_path, capsys):
    """A repository named by a path outside kernels_local/ (a published one) is built as it is."""
    repo = _copy_sources("silu_mul", tmp_path / "silu_mul")
    copy = repo / "torch-ext" / "silu_mul" / "_fast_launch.py"
    copy.write_text(copy.read_text() + "# its own\n")
    assert build_script.main([str(repo)]) == 0
    assert build_script.main([str(repo), "--check"]) == 0
    assert copy.read_text().endswith("# its own\n")
