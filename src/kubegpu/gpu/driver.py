"""Where an NVIDIA driver installation keeps its files under a driver root.

Owns the facts NVIDIA's plugin relies on when it looks for driver files: the
library directories, in its search order. The NVML backend searches them for
``libnvidia-ml.so.1``; CDI spec generation for the libraries a container needs.
Pure data; no I/O.
"""

from __future__ import annotations

#: Library directories under a (container) driver root, in NVIDIA's search order.
LIBRARY_DIRS = (
    "/usr/lib64",
    "/usr/lib/x86_64-linux-gnu",
    "/usr/lib/aarch64-linux-gnu",
    "/lib64",
    "/lib/x86_64-linux-gnu",
    "/lib/aarch64-linux-gnu",
)
