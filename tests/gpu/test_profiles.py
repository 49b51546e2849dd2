"""Shipped machine profiles load, match the reference topologies, and bad profiles are named errors."""

from __future__ import annotations

import json
import zlib
from pathlib import Path

import pytest
import yaml

from kubegpu.gpu import errors, profiles
from kubegpu.gpu.model import PcieLink

REQUIRED = ["dgx-a100", "dgx1-v100", "pcie-4xt4", "a100-mig", "hgx-h200"]


@pytest.mark.parametrize("name", profiles.available())
def test_every_shipped_profile_loads_and_round_trips_through_canonical_json(name: str) -> None:
    machine = profiles.load(name)
    assert machine.name == name
    again = profiles.machine_from_dict(json.loads(profiles.export_json(machine)))
    assert again == machine


def test_the_required_profiles_are_shipped() -> None:
    assert set(REQUIRED) <= set(profiles.available())


def test_dgx_a100_is_eight_a100_80gb_on_nvswitch_with_numa_halves() -> None:
    m = profiles.load("dgx-a100")
    assert [g.product_name for g in m.gpus] == ["NVIDIA A100-SXM4-80GB"] * 8
    assert m.topology.numa == (0, 0, 0, 0, 1, 1, 1, 1)
    assert all(m.topology.same_fabric(0, j) for j in range(1, 8))
    assert all(c == 0 for row in m.topology.nvlink for c in row)
    assert len({g.uuid for g in m.gpus}) == 8


# go-gpuallocator's DGX-1 Volta node: (a, b) -> (NVLinks, PCIe link)
DGX1_VOLTA = {
    (0, 1): (1, PcieLink.SINGLE_SWITCH),
    (0, 2): (1, PcieLink.HOST_BRIDGE),
    (0, 3): (2, PcieLink.HOST_BRIDGE),
    (0, 4): (2, PcieLink.CROSS_CPU),
    (1, 2): (2, PcieLink.HOST_BRIDGE),
    (1, 3): (1, PcieLink.HOST_BRIDGE),
    (1, 5): (2, PcieLink.CROSS_CPU),
    (2, 3): (2, PcieLink.SINGLE_SWITCH),
    (2, 6): (1, PcieLink.CROSS_CPU),
    (3, 7): (1, PcieLink.CROSS_CPU),
    (4, 5): (1, PcieLink.SINGLE_SWITCH),
    (4, 6): (1, PcieLink.HOST_BRIDGE),
    (4, 7): (2, PcieLink.HOST_BRIDGE),
    (5, 6): (2, PcieLink.HOST_BRIDGE),
    (5, 7): (1, PcieLink.HOST_BRIDGE),
    (6, 7): (2, PcieLink.SINGLE_SWITCH),
    (0, 5): (0, PcieLink.CROSS_CPU),
    (3, 4): (0, PcieLink.CROSS_CPU),
}


@pytest.mark.parametrize(("pair", "expected"), DGX1_VOLTA.items(), ids=[f"{a}-{b}" for a, b in DGX1_VOLTA])
def test_dgx1_v100_links_match_go_gpuallocators_volta_node(
    pair: tuple[int, int], expected: tuple[int, PcieLink]
) -> None:
    t = profiles.load("dgx1-v100").topology
    a, b = pair
    assert (t.nvlink[a][b], t.pcie[a][b]) == expected
    assert (t.nvlink[b][a], t.pcie[b][a]) == expected


def test_dgx1_v100_every_gpu_has_six_nvlinks() -> None:
    t = profiles.load("dgx1-v100").topology
    assert [sum(row) for row in t.nvlink] == [6] * 8


def test_pcie_4xt4_has_no_nvlink_and_multi_switch_pairs() -> None:
    t = profiles.load("pcie-4xt4").topology
    assert all(c == 0 for row in t.nvlink for c in row)
    assert t.pcie[0][1] is PcieLink.MULTI_SWITCH
    assert t.pcie[0][2] is PcieLink.CROSS_CPU
    assert t.nvswitch == (None,) * 4


def test_a100_mig_has_whole_gpus_and_a_mix_of_profiles() -> None:
    m = profiles.load("a100-mig")
    assert [g.mig_enabled for g in m.gpus] == [False, False] + [True] * 6
    layout = sorted(d.profile for d in m.mig_devices())
    assert layout.count("1g.10gb") == 15
    assert {"2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"} <= set(layout)
    for gpu in m.gpus:
        assert sum(d.gi_slices for d in gpu.mig_devices) <= 7
        assert all(d.parent_uuid == gpu.uuid and d.uuid.startswith("MIG-") for d in gpu.mig_devices)


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d.update(colour="red"), "colour: unknown key"),
        (lambda d: d["gpus"][1].update(speed=3), "gpus[1].speed: unknown key"),
        (lambda d: d["gpus"][0].pop("pcie"), "gpus[0].pcie: required key is missing"),
        (lambda d: d["gpus"][0].update(mig=["9g.99gb"]), "unknown MIG profile '9g.99gb'"),
        (lambda d: d.update(nvlink={"0-9": 1}), "nvlink.0-9: GPU index out of range"),
        (lambda d: d["gpu"].update(compute_capability="eight"), "compute capability must look like"),
    ],
    ids=["unknown-top-key", "unknown-gpu-key", "missing-pcie", "unknown-mig-profile", "bad-link", "bad-cc"],
)
def test_a_malformed_profile_is_an_error_naming_file_and_key(tmp_path: Path, mutate, message: str) -> None:  # type: ignore[no-untyped-def]
    import yaml

    data = yaml.safe_load((profiles.profiles_dir() / "dgx-a100.yaml").read_text())
    mutate(data)
    path = tmp_path / "broken.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(errors.ProfileError) as info:
        profiles.load(str(path))
    assert message in str(info.value)
    assert str(path) in str(info.value)


def test_an_unknown_profile_name_lists_the_shipped_ones() -> None:
    with pytest.raises(errors.ProfileError, match="dgx-a100"):
        profiles.load("dgx-z9000")


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"gpus": 2, "pcie": [[None, "warp"], ["warp", None]], "nvlink": [[0, 0], [0, 0]]}, "pcie[0][1]"),
        ({"gpus": 2, "pcie": [[None, "same-cpu"]], "nvlink": [[0, 0], [0, 0]]}, "2x2 matrix"),
        ({"gpus": 2, "pcie": [[None, "same-cpu"], ["same-cpu", None]], "nvlink": [[0, -1], [-1, 0]]}, "nvlink[0][1]"),
        ({"gpus": 2, "pcie": [[None, "same-cpu"], ["cross-cpu", None]], "nvlink": [[0, 0], [0, 0]]}, "differ"),
        ({"pcie": [], "nvlink": []}, "gpus: required key is missing"),
    ],
    ids=["unknown-link", "short-matrix", "negative-links", "asymmetric", "no-gpus"],
)
def test_a_malformed_topology_file_names_the_problem(data: dict[str, object], message: str) -> None:
    with pytest.raises(errors.ProfileError, match=message.replace("[", r"\[").replace("]", r"\]")):
        profiles.topology_from_dict(data, "topo.json")


@pytest.mark.parametrize("name", profiles.available())
def test_a_shipped_profile_reads_the_same_with_libyaml_and_pure_python_yaml(name: str) -> None:
    text = (profiles.profiles_dir() / f"{name}.yaml").read_text()
    libyaml = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    assert yaml.load(text, Loader=libyaml) == yaml.load(text, Loader=yaml.SafeLoader)
    assert profiles._parse_yaml(text) == yaml.load(text, Loader=yaml.SafeLoader)


@pytest.mark.parametrize("name", profiles.available())
def test_a_shipped_profiles_canonical_twin_is_current(name: str) -> None:
    current = profiles.canonical_document(name)
    assert profiles.canonical_path(name).read_text() == current, "stale twin: run python -m kubegpu.gpu.profiles"


@pytest.mark.parametrize("name", profiles.available())
def test_a_shipped_profile_loads_from_its_twin_as_the_same_machine_as_from_its_yaml(name: str) -> None:
    yaml_path = profiles.profiles_dir() / f"{name}.yaml"
    twin = profiles._canonical_twin(name, yaml_path.read_bytes())
    assert twin is not None
    assert twin == profiles._load_path(yaml_path, name, use_canonical=False) == profiles.load(name)


def test_a_twin_made_from_other_yaml_is_not_used() -> None:
    raw = (profiles.profiles_dir() / "dgx-a100.yaml").read_bytes()
    assert profiles._canonical_twin("dgx-a100", raw + b"# edited\n") is None
    assert profiles._canonical_twin("no-such-profile", raw) is None


def test_a_damaged_twin_is_not_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    raw = (profiles.profiles_dir() / "dgx-a100.yaml").read_bytes()
    twin = tmp_path / "dgx-a100.json"
    monkeypatch.setattr(profiles, "canonical_path", lambda name: tmp_path / f"{name}.json")
    for text in ("{not json", json.dumps({"yaml_crc32": zlib.crc32(raw), "machine": {"gpus": 3}})):
        twin.write_text(text)
        assert profiles._canonical_twin("dgx-a100", raw) is None


def test_a_shipped_profile_is_parsed_once_and_a_profile_file_at_every_load(tmp_path: Path) -> None:
    assert profiles.load("dgx-a100") is profiles.load("dgx-a100")
    copy = tmp_path / "mine.yaml"
    copy.write_text((profiles.profiles_dir() / "dgx-a100.yaml").read_text())
    first = profiles.load(str(copy))
    copy.write_text(copy.read_text().replace("dgx-a100", "mine"))
    assert profiles.load(str(copy)).name != first.name


@pytest.mark.parametrize("content", [b"\xff\xfe\x80binary", b"[" * 5000], ids=["binary", "deeply-nested"])
def test_a_file_that_is_not_a_profile_is_a_profile_error(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "m.yaml"
    path.write_bytes(content)
    with pytest.raises(errors.ProfileError, match=str(path)):
        profiles.load(str(path))
