import pytest
from committed import copy_committed_results


@pytest.fixture(scope="session")
def committed_results(tmp_path_factory):
    """A read-only view (by convention) of the committed results/: copy it further before changing it."""
    return copy_committed_results(tmp_path_factory.mktemp("committed"))
