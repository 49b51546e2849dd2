"""The policy names stand alone: reading them builds no solver, and the package's names are theirs."""

from __future__ import annotations

import subprocess
import sys

import pytest

from kubegpu import placement
from kubegpu.placement import names, policies, shared


def _loaded_after(code: str) -> set[str]:
    """The kubegpu.placement modules a fresh interpreter holds after running ``code``."""
    probe = f"{code}\nimport sys\nprint(' '.join(m for m in sys.modules if m.startswith('kubegpu.placement')))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    return set(out.split())


def test_reading_the_policy_names_loads_no_solver() -> None:
    assert _loaded_after("from kubegpu.placement import names") == {"kubegpu.placement", "kubegpu.placement.names"}


def test_the_first_pick_through_the_package_loads_the_policies() -> None:
    loaded = _loaded_after("from kubegpu import placement\nplacement.pick_shared")
    assert {"kubegpu.placement.policies", "kubegpu.placement.partition", "kubegpu.placement.shared"} <= loaded


@pytest.mark.parametrize("name", placement.__all__)
def test_every_public_name_of_the_package_resolves(name: str) -> None:
    assert getattr(placement, name) is not None


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'solve'"):
        _ = placement.solve  # type: ignore[attr-defined]


def test_the_policies_and_the_shared_module_use_the_names_module() -> None:
    assert policies.POLICIES == names.POLICIES == ("topology", "best-effort", "distributed", "packed")
    assert (policies.DEFAULT_WHOLE_GPU_POLICY, policies.DEFAULT_SHARED_POLICY) == ("topology", "distributed")
    assert shared.POLICIES == names.SHARED_POLICIES
    assert placement.SHARED_POLICIES is names.SHARED_POLICIES
