import pytest

from mlpbench import envinfo


@pytest.mark.parametrize("gpu, name", [
    ("NVIDIA H200", "h200"),
    ("NVIDIA H100 80GB HBM3", "h100"),
    ("NVIDIA H100 PCIe", "h100-pcie"),
    ("NVIDIA H100 NVL", "h100-nvl"),
    ("NVIDIA H200 NVL", "h200-nvl"),
    ("NVIDIA A100-SXM4-80GB", "a100-sxm4"),
    ("NVIDIA GeForce RTX 4090", "geforce-rtx-4090"),
])
def test_a_gpu_files_under_its_chip_and_board_not_its_memory_size(gpu, name):
    assert envinfo.gpu_slug(gpu) == name


def test_a_cpu_box_is_named_by_its_architecture(monkeypatch):
    monkeypatch.setattr(envinfo, "environment", lambda: {"device": "cpu", "gpu": "none"})
    monkeypatch.setattr(envinfo.platform, "machine", lambda: "x86_64")
    assert envinfo.machine_slug() == "cpu-x86-64"
