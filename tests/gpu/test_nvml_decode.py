"""Pure decoding of NVML values: MIG profile names, topology levels, versions, bus ids, sysfs text, fabrics."""

from __future__ import annotations

import pynvml
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kubegpu.gpu import profiles
from kubegpu.gpu.backend import HealthEventKind
from kubegpu.gpu.model import PcieLink
from kubegpu.gpu.nvml import decode

MIB = 1024 * 1024
A100_80GB = 81920 * MIB
A100_40GB = 40960 * MIB
H200 = 143771 * MIB


@pytest.mark.parametrize(
    ("gi", "ci", "mib", "total", "name"),
    [
        (decode.GI_1_SLICE, decode.CI_1_SLICE, 9856, A100_80GB, "1g.10gb"),
        (decode.GI_1_SLICE_REV2, decode.CI_1_SLICE, 19968, A100_80GB, "1g.20gb"),
        (decode.GI_1_SLICE_REV1, decode.CI_1_SLICE, 9856, A100_80GB, "1g.10gb+me"),
        (decode.GI_2_SLICE, decode.CI_1_SLICE, 19968, A100_80GB, "1c.2g.20gb"),
        (decode.GI_3_SLICE, decode.CI_3_SLICE, 40192, A100_80GB, "3g.40gb"),
        (decode.GI_7_SLICE, decode.CI_7_SLICE, 80384, A100_80GB, "7g.80gb"),
        (decode.GI_7_SLICE, decode.CI_7_SLICE_NVL, 80384, A100_80GB, "7g.80gb"),
        (decode.GI_1_SLICE, decode.CI_1_SLICE, 4864, A100_40GB, "1g.5gb"),
        (decode.GI_1_SLICE, decode.CI_1_SLICE, 16896, H200, "1g.18gb"),
        (decode.GI_3_SLICE, decode.CI_3_SLICE, 67840, H200, "3g.71gb"),
        (decode.GI_7_SLICE, decode.CI_7_SLICE, 135424, H200, "7g.141gb"),
        (decode.GI_1_SLICE_ALL_ME, decode.CI_1_SLICE, 16896, H200, "1g.18gb+me.all"),
        (decode.GI_1_SLICE_GFX, decode.CI_1_SLICE, 16896, H200, "1g.18gb+gfx"),
        (decode.GI_4_SLICE_GFX, decode.CI_2_SLICE, 67840, H200, "2c.4g.71gb+gfx"),
        (decode.GI_1_SLICE_NO_ME, decode.CI_1_SLICE, 16896, H200, "1g.18gb-me"),
    ],
    ids=lambda v: str(v),
)
def test_mig_profile_names_are_spelled_as_go_nvlib_spells_them(
    gi: int, ci: int, mib: int, total: int, name: str
) -> None:
    assert decode.mig_profile_name(gi, ci, mib, total) == name


@pytest.mark.parametrize(
    ("name", "slices", "mib", "total_mib", "gi"),
    [
        ("1g.10gb", 1, 9856, 81920, decode.GI_1_SLICE),
        ("1g.20gb", 1, 19968, 81920, decode.GI_1_SLICE_REV2),
        ("1g.10gb+me", 1, 9856, 81920, decode.GI_1_SLICE_REV1),
        ("1c.2g.20gb", 2, 19968, 81920, decode.GI_2_SLICE),
        ("7g.80gb", 7, 80384, 81920, decode.GI_7_SLICE),
        ("1g.35gb", 1, 33536, 143771, decode.GI_1_SLICE_REV2),
        ("1g.18gb+me.all", 1, 16896, 143771, decode.GI_1_SLICE_ALL_ME),
        ("2c.4g.71gb+gfx", 4, 67840, 143771, decode.GI_4_SLICE_GFX),
        ("1g.18gb-me", 1, 16896, 143771, decode.GI_1_SLICE_NO_ME),
    ],
    ids=lambda v: str(v),
)
def test_a_profile_name_gives_back_its_gpu_instance_profile(
    name: str, slices: int, mib: int, total_mib: int, gi: int
) -> None:
    assert decode.gi_profile_id(name, slices, mib, total_mib) == gi


def test_a_spelling_no_gpu_instance_profile_has_is_an_error() -> None:
    with pytest.raises(ValueError, match=r"no GPU instance profile is spelled '3g\.40gb\+me' with 3 slices"):
        decode.gi_profile_id("3g.40gb+me", 3, 40192, 81920)


def test_mig_memory_rounds_half_away_from_zero_like_go() -> None:
    # 4/8 of 141 GiB is 70.5: Go's math.Round gives 71 where Python's round() would give 70.
    assert decode.mig_memory_gb(H200, 67840) == 71


@pytest.mark.parametrize(("gi", "ci"), [(0x11 + 5, 0), (0, 0x42)], ids=["unknown-gi", "unknown-ci"])
def test_unknown_profile_ids_are_errors_naming_the_id(gi: int, ci: int) -> None:
    with pytest.raises(ValueError, match=f"profile id {gi if gi > 0x10 else ci}"):
        decode.mig_profile_name(gi, ci, 9856, A100_80GB)


@given(st.integers(1, 512 * 1024), st.integers(1, 512 * 1024))
def test_a_bigger_mig_instance_never_gets_fewer_gb(gpu_mib: int, mig_mib: int) -> None:
    total = gpu_mib * MIB
    assert decode.mig_memory_gb(total, mig_mib) <= decode.mig_memory_gb(total, mig_mib + 1)


def test_the_shipped_mig_profile_table_names_agree_with_the_memory_rule() -> None:
    # The simulated profiles name MIG devices by hand; NVML derives the name from memory sizes.
    totals = {
        "NVIDIA A100-SXM4-80GB": A100_80GB,
        "NVIDIA A100-SXM4-40GB": A100_40GB,
        "NVIDIA H100 80GB HBM3": 81559 * MIB,
        "NVIDIA H200": H200,
    }
    for product, specs in profiles.mig_profiles().items():
        if product not in totals:
            continue  # a product added later is covered by the discovery tests of the profiles using it
        for name, spec in specs.items():
            assert f"g.{decode.mig_memory_gb(totals[product], spec.memory_mib)}gb" in name, (product, name)


@pytest.mark.parametrize(
    ("level", "link"),
    [
        (0, PcieLink.SAME_BOARD),
        (10, PcieLink.SINGLE_SWITCH),
        (20, PcieLink.MULTI_SWITCH),
        (30, PcieLink.HOST_BRIDGE),
        (40, PcieLink.SAME_CPU),
        (50, PcieLink.CROSS_CPU),
    ],
    ids=["internal", "single", "multiple", "hostbridge", "node", "system"],
)
def test_topology_levels_map_to_pcie_links(level: int, link: PcieLink) -> None:
    assert decode.pcie_link(level) is link


def test_an_unknown_topology_level_is_an_error() -> None:
    with pytest.raises(ValueError, match="level 35"):
        decode.pcie_link(35)


@pytest.mark.parametrize(("value", "text"), [(12040, "12.4"), (12060, "12.6"), (11080, "11.8"), (13000, "13.0")])
def test_cuda_driver_versions(value: int, text: str) -> None:
    assert decode.cuda_version(value) == text


@pytest.mark.parametrize(
    ("cc", "cores"),
    [
        ((7, 0), 64),
        ((7, 5), 64),
        ((8, 0), 64),
        ((8, 6), 128),
        ((8, 9), 128),
        ((9, 0), 128),
        ((6, 1), 128),
        ((1, 0), None),
    ],
    ids=lambda v: str(v),
)
def test_cuda_cores_per_sm(cc: tuple[int, int], cores: int | None) -> None:
    assert decode.cores_per_sm(cc) == cores


@pytest.mark.parametrize(
    ("raw", "nvml", "sysfs"),
    [
        ("00000000:07:00.0", "00000000:07:00.0", "0000:07:00.0"),
        ("0000:b7:00.0", "00000000:B7:00.0", "0000:b7:00.0"),
        ("0001:3B:1f.7", "00000001:3B:1F.7", "0001:3b:1f.7"),
        ("af:00.0", "00000000:AF:00.0", "0000:af:00.0"),
    ],
    ids=["nvml", "legacy-lower", "domain-1", "no-domain"],
)
def test_pci_bus_ids_in_nvml_and_sysfs_spelling(raw: str, nvml: str, sysfs: str) -> None:
    assert decode.nvml_bus_id(raw) == nvml
    assert decode.sysfs_pci_name(raw) == sysfs


@given(st.integers(0, 0xFFFF), st.integers(0, 0xFF), st.integers(0, 0x1F), st.integers(0, 7))
def test_bus_id_spellings_round_trip(domain: int, bus: int, device: int, function: int) -> None:
    nvml = f"{domain:08X}:{bus:02X}:{device:02X}.{function:X}"
    assert decode.nvml_bus_id(decode.sysfs_pci_name(nvml)) == nvml


def test_a_malformed_bus_id_is_an_error_naming_it() -> None:
    with pytest.raises(ValueError, match="'gpu0'"):
        decode.nvml_bus_id("gpu0")


@pytest.mark.parametrize(("text", "node"), [("0\n", 0), ("3", 3), ("-1\n", None), ("", None), ("x", None)])
def test_sysfs_numa_node(text: str, node: int | None) -> None:
    assert decode.numa_node(text) == node


@pytest.mark.parametrize(("text", "code"), [("0x030200\n", 0x0302), ("0x030000", 0x0300), ("junk", None)])
def test_sysfs_pci_class(text: str, code: int | None) -> None:
    assert decode.pci_class(text) == code


def test_gpus_sharing_switches_directly_or_through_each_other_are_one_fabric() -> None:
    a, b, c = "00000000:E0:00.0", "00000000:E1:00.0", "00000000:F0:00.0"
    labels = decode.fabrics([frozenset({b}), frozenset({a, b}), frozenset({c}), frozenset(), frozenset({a})])
    assert labels == [f"nvswitch:{a}", f"nvswitch:{a}", f"nvswitch:{c}", None, f"nvswitch:{a}"]


@given(st.lists(st.frozensets(st.sampled_from(["s0", "s1", "s2", "s3"]), max_size=2), max_size=8))
def test_fabric_labels_are_shared_exactly_by_connected_gpus(switches: list[frozenset[str]]) -> None:
    labels = decode.fabrics(switches)
    for i, reached in enumerate(switches):
        assert (labels[i] is None) == (not reached)
        for j, other in enumerate(switches):
            if reached & other:
                assert labels[i] == labels[j]


@pytest.mark.parametrize(
    ("event_type", "kind"),
    [(0x8, HealthEventKind.XID), (0x2, HealthEventKind.ECC_DBE), (0x1, HealthEventKind.ECC_SBE), (0x4, None)],
    ids=["xid", "dbe", "sbe", "pstate"],
)
def test_event_types(event_type: int, kind: HealthEventKind | None) -> None:
    assert decode.event_kind(event_type) is kind


def test_the_whole_gpu_instance_id_is_none() -> None:
    assert (decode.instance_id(0xFFFFFFFF), decode.instance_id(0), decode.instance_id(3)) == (None, 0, 3)


def test_library_candidates_search_the_container_root_then_the_driver_root() -> None:
    found = decode.library_candidates("/driver-root", "/run/nvidia/driver/")
    assert found[0] == "/driver-root/usr/lib64/libnvidia-ml.so.1"
    assert found[5] == "/driver-root/lib/aarch64-linux-gnu/libnvidia-ml.so.1"
    assert found[6] == "/run/nvidia/driver/usr/lib64/libnvidia-ml.so.1"
    assert len(found) == 12
    assert decode.library_candidates("/", "/")[:2] == [
        "/usr/lib64/libnvidia-ml.so.1",
        "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1",
    ]
    assert len(decode.library_candidates("/", "/")) == 6


def test_our_nvml_constants_are_nvidia_ml_py_s() -> None:
    assert (decode.ERROR_GPU_IS_LOST, decode.ERROR_TIMEOUT, decode.ERROR_NOT_SUPPORTED) == (
        pynvml.NVML_ERROR_GPU_IS_LOST,
        pynvml.NVML_ERROR_TIMEOUT,
        pynvml.NVML_ERROR_NOT_SUPPORTED,
    )
    assert (decode.ERROR_LIB_RM_VERSION_MISMATCH, decode.ERROR_LIBRARY_NOT_FOUND, decode.ERROR_NO_PERMISSION) == (
        pynvml.NVML_ERROR_LIB_RM_VERSION_MISMATCH,
        pynvml.NVML_ERROR_LIBRARY_NOT_FOUND,
        pynvml.NVML_ERROR_NO_PERMISSION,
    )
    assert (
        pynvml.nvmlEventTypeXidCriticalError
        | pynvml.nvmlEventTypeDoubleBitEccError
        | pynvml.nvmlEventTypeSingleBitEccError
    ) == decode.HEALTH_EVENTS
    for name in ("1_SLICE_REV1", "1_SLICE_REV2", "4_SLICE_GFX", "2_SLICE_NO_ME", "2_SLICE_ALL_ME", "7_SLICE"):
        assert getattr(decode, f"GI_{name}") == getattr(pynvml, f"NVML_GPU_INSTANCE_PROFILE_{name}")
    assert decode.CI_7_SLICE_NVL == pynvml.NVML_COMPUTE_INSTANCE_PROFILE_7_SLICE_NVL


def test_init_failure_text_names_cause_code_and_library() -> None:
    text = decode.init_failure(18, "/usr/lib64/libnvidia-ml.so.1", "RM has detected an NVML/RM version mismatch.")
    assert text.startswith("driver/library version mismatch")
    assert "NVML error 18" in text and "/usr/lib64/libnvidia-ml.so.1" in text


CLUSTER = bytes.fromhex("6a0f3c1e58b24d7e9c412f8e7d5b9a10")


@pytest.mark.parametrize(
    ("cluster", "status", "clique", "state", "fabric"),
    [
        (CLUSTER, 0, 7, 3, ("6a0f3c1e-58b2-4d7e-9c41-2f8e7d5b9a10", 7)),
        (CLUSTER, 0, 7, 0xABCD0003, ("6a0f3c1e-58b2-4d7e-9c41-2f8e7d5b9a10", 7)),  # nvidia-ml-py's 32-bit state
        (bytes(16), 0, 7, 3, None),  # registered, but no cluster: not attached (go-nvlib)
        (CLUSTER, 0, 7, 2, None),  # still in progress
        (CLUSTER, 3, 7, 3, None),  # completed with an error
    ],
    ids=["attached", "state_low_byte_only", "zero_cluster", "in_progress", "failed"],
)
def test_fabric_info_is_an_attachment_only_when_completed_successfully_with_a_cluster(
    cluster: bytes, status: int, clique: int, state: int, fabric: tuple[str, int] | None
) -> None:
    got = decode.fabric(cluster, status, clique, state)
    assert (None if got is None else (got.cluster_uuid, got.clique_id)) == fabric


def _vgpu_config(**changes: int) -> bytes:
    from kubegpu.gpu.model import VgpuHost
    from tests.fake_nvml.harness import pci_config

    config = bytearray(pci_config(VgpuHost("550.54.16", "r550_40")))
    for offset, value in changes.items():
        config[int(offset[1:], 16)] = value
    return bytes(config)


@pytest.mark.parametrize(
    ("config", "host"),
    [
        (_vgpu_config(), ("550.54.16", "r550_40")),
        (_vgpu_config()[:64], None),  # what an unprivileged reader gets
        (_vgpu_config(x06=0x00), None),  # no capability list
        (_vgpu_config(xCB=ord("X")), None),  # a vendor capability without the VF signature
        (_vgpu_config(x61=0x60), None),  # a capability chain that loops, never reaching the vendor one
        (_vgpu_config(xCE=0), None),  # a record of length 0
        (bytes(256), None),  # a passthrough GPU
    ],
    ids=["vgpu", "cut_short", "no_capabilities", "no_signature", "looped_chain", "endless_record", "passthrough"],
)
def test_the_vgpu_host_is_read_from_nvidias_vendor_capability(config: bytes, host: tuple[str, str] | None) -> None:
    got = decode.vgpu_host(config)
    assert (None if got is None else (got.host_driver_version, got.host_driver_branch)) == host


@pytest.mark.parametrize("raw", [bytes(range(16)), b"\xff" * 16, bytes(16)])
def test_a_cluster_uuid_reads_as_the_uuid_module_writes_it(raw: bytes) -> None:
    import uuid

    assert decode.uuid_text(raw) == str(uuid.UUID(bytes=raw))
