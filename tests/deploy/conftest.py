"""The deploy tests' fixtures: a temporary host root with the kubelet emulator, and the processes a test starts."""

from tests.deploy.podrun import host, procs

__all__ = ["host", "procs"]
