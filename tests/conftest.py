"""Tests never read the checkout's results/: a machine's noise file is looked for beside the fixture
results a test builds, and, in place of the repository's own results/, in an empty folder (this
process and the commands it starts)."""

import os
import tempfile

os.environ["MLPBENCH_OWN_RESULTS"] = tempfile.mkdtemp(prefix="mlpbench-no-own-results-")
