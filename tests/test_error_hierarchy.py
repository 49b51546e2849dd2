"""One error hierarchy per package: every public exception a package defines derives from its base error."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest

BASES = {
    "kubegpu.deviceplugin": ("kubegpu.deviceplugin.errors", "DevicePluginError"),
    "kubegpu.monitoring": ("kubegpu.monitoring.errors", "MonitoringError"),
    "kubegpu.kubelet": ("kubegpu.kubelet.errors", "KubeletError"),
    "kubegpu.gpu": ("kubegpu.gpu.errors", "GpuError"),
    "kubegpu.placement": ("kubegpu.placement.errors", "PlacementError"),
    "kubegpu.scheduling": ("kubegpu.scheduling.core.errors", "SchedulingError"),
}


def _exceptions(package: str) -> list[tuple[str, type[BaseException]]]:
    found = []
    root = importlib.import_module(package)
    for info in pkgutil.walk_packages(root.__path__, package + "."):
        module = importlib.import_module(info.name)
        for name, obj in vars(module).items():
            defined_here = inspect.isclass(obj) and obj.__module__ == module.__name__
            if defined_here and issubclass(obj, BaseException) and not name.startswith("_"):
                found.append((f"{module.__name__}.{name}", obj))
    return found


@pytest.mark.parametrize("package", list(BASES))
def test_every_public_exception_of_a_package_derives_from_its_base_error(package: str) -> None:
    module, name = BASES[package]
    base = getattr(importlib.import_module(module), name)
    exceptions = _exceptions(package)
    assert exceptions, f"{package} defines no exception at all: is the scan looking in the right place?"
    strays = [qualified for qualified, cls in exceptions if not issubclass(cls, base)]
    assert strays == [], f"not derived from {name}: {strays}"
