"""Runtime options: the kubelet's first-wins merge of cached Allocate answers across resources."""

from __future__ import annotations

from kubegpu.api.deviceplugin.v1beta1 import api_pb2
from kubegpu.kubelet import runoptions


def resp(**kw: object) -> api_pb2.ContainerAllocateResponse:
    return api_pb2.ContainerAllocateResponse(**kw)  # type: ignore[arg-type]


def test_one_response_becomes_the_containers_options() -> None:
    opts = runoptions.merge(
        [
            (
                "nvidia.com/gpu",
                resp(
                    envs={"NVIDIA_VISIBLE_DEVICES": "GPU-a"},
                    mounts=[api_pb2.Mount(container_path="/lib", host_path="/host/lib", read_only=True)],
                    devices=[
                        api_pb2.DeviceSpec(container_path="/dev/nvidia0", host_path="/dev/nvidia0", permissions="rwm")
                    ],
                    annotations={"a": "1"},
                    cdi_devices=[api_pb2.CDIDevice(name="nvidia.com/gpu=0")],
                ),
            )
        ]
    )
    assert opts.to_json() == {
        "envs": {"NVIDIA_VISIBLE_DEVICES": "GPU-a"},
        "mounts": [
            {
                "name": "/lib",
                "container_path": "/lib",
                "host_path": "/host/lib",
                "read_only": True,
                "selinux_relabel": False,
            }
        ],
        "devices": [{"container_path": "/dev/nvidia0", "host_path": "/dev/nvidia0", "permissions": "rwm"}],
        "annotations": {"a": "1"},
        "cdi_devices": ["nvidia.com/gpu=0"],
        "conflicts": [],
    }


def test_first_value_wins_for_envs_devices_mounts_and_annotations_and_conflicts_are_reported() -> None:
    first = resp(
        envs={"X": "1", "SAME": "s"},
        devices=[api_pb2.DeviceSpec(container_path="/dev/a", host_path="/dev/a1")],
        mounts=[api_pb2.Mount(container_path="/m", host_path="/h1")],
        annotations={"k": "v1"},
    )
    second = resp(
        envs={"X": "2", "SAME": "s", "Y": "y"},
        devices=[api_pb2.DeviceSpec(container_path="/dev/a", host_path="/dev/a2")],
        mounts=[api_pb2.Mount(container_path="/m", host_path="/h2")],
        annotations={"k": "v2"},
    )
    opts = runoptions.merge([("r1", first), ("r2", second)])
    assert opts.envs == {"SAME": "s", "X": "1", "Y": "y"}
    assert [d.host_path for d in opts.devices] == ["/dev/a1"]
    assert [m.host_path for m in opts.mounts] == ["/h1"]
    assert opts.annotations == {"k": "v1"}
    assert [c.split(":")[0] for c in opts.conflicts] == [
        "Environment variable has conflicting setting",
        "Container device has conflicting mapping host devices",
        "Container mount has conflicting mapping host mounts",
        "Annotation has conflicting setting",
    ]


def test_identical_duplicates_are_skipped_silently() -> None:
    same = resp(envs={"X": "1"}, mounts=[api_pb2.Mount(container_path="/m", host_path="/h")])
    opts = runoptions.merge([("r1", same), ("r2", same)])
    assert (opts.envs, len(opts.mounts), opts.conflicts) == ({"X": "1"}, 1, ())


def test_duplicate_cdi_device_names_are_dropped_in_order() -> None:
    a = resp(cdi_devices=[api_pb2.CDIDevice(name="v/c=0"), api_pb2.CDIDevice(name="v/c=1")])
    b = resp(cdi_devices=[api_pb2.CDIDevice(name="v/c=1"), api_pb2.CDIDevice(name="v/c=2")])
    assert runoptions.merge([("r1", a), ("r2", b)]).cdi_devices == ("v/c=0", "v/c=1", "v/c=2")


def test_no_cached_answers_means_empty_options() -> None:
    assert runoptions.merge([]).to_json()["envs"] == {}
