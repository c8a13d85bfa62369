"""ASV imports this package before a benchmark module, in its discovery process and in the fork
server every benchmark process comes from: the settings torch and Triton read go first."""

from mlpbench import environment

environment.prepare()
environment.interpret_triton_without_gpu()
