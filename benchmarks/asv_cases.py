"""ASV's view of the suite: classes generated from the registry by mlpbench.asv_suite (no list here)."""

from mlpbench.asv_suite import classes

globals().update(classes())
