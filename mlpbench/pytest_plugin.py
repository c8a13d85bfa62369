"""The pytest plugin behind the benchmark suite: case selection options and machine info.

Loaded by the repository's conftest.py. Case selection options mirror `mlpbench run`;
pytest-benchmark's own options work unchanged.
"""

import pytest

from mlpbench import registry


def pytest_addoption(parser):
    group = parser.getgroup("mlpbench", "mlpbench case selection")
    group.addoption("--tier", choices=registry.TIERS, default=None,
                    help="cases of this tier and the tiers below it (default: standard with a GPU, quick without)")
    group.addoption("--op", action="append", default=None, help=f"only this op (repeatable): {', '.join(registry.OPS)}")
    group.addoption("--variant", action="append", default=None,
                    help=f"only this variant (repeatable): {', '.join(registry.all_variants())}")
    group.addoption("--dtype", action="append", default=None, help=f"only this dtype (repeatable): {', '.join(registry.DTYPES)}")
    group.addoption("--shape", action="append", default=None, help="only this shape id (repeatable), e.g. t8192-d768-h3072")


def selected_tier(config) -> str:
    from mlpbench.runner import default_device

    return config.getoption("--tier") or ("standard" if default_device() == "cuda" else "quick")


def selected_cases(config) -> list[registry.Case]:
    tier = selected_tier(config)
    try:
        return registry.select(
            tier,
            ops=config.getoption("--op"),
            variants=config.getoption("--variant"),
            dtypes=config.getoption("--dtype"),
            shapes=config.getoption("--shape"),
        )
    except registry.SelectionError as exc:
        raise pytest.UsageError(str(exc)) from None


def pytest_benchmark_update_machine_info(config, machine_info):
    from mlpbench.envinfo import environment, machine_slug
    from mlpbench.timing import ceilings

    machine_info["mlpbench"] = environment() | {"machine": machine_slug(), "ceilings": ceilings()}
