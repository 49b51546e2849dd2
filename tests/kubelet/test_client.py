"""Client-side checks that need no emulator: manifest files and pod names."""

from __future__ import annotations

from pathlib import Path

import pytest

from kubegpu.kubelet import client, errors


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("kind: Pod\nmetadata: [\n", "malformed YAML"),
        ("", "expected one Pod document, found 0"),
        ("kind: Pod\n---\nkind: Pod\n", "expected one Pod document, found 2"),
        ("- a\n- b\n", "the document is a list, not a mapping"),
        ("apiVersion: v1\nkind: Service\n", "not a valid Pod: kind: must be Pod, got 'Service'"),
        (
            "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n  - name: c\n"
            "    resources: {limits: {nvidia.com/gpu: 1.5}}\n",
            'limits[nvidia.com/gpu]: Invalid value: "1.5": must be an integer',
        ),
    ],
    ids=["malformed-yaml", "empty-file", "two-documents", "a-list", "not-a-pod", "non-integer-quantity"],
)
def test_bad_manifest_files_are_refused_naming_the_file_before_anything_is_sent(
    tmp_path: Path, text: str, message: str
) -> None:
    path = tmp_path / "pod.yaml"
    path.write_text(text)
    with pytest.raises(errors.PodManifestError) as exc:
        client.admit(path, socket_dir=tmp_path / "nowhere")
    assert str(exc.value).startswith(f"{path}: ")
    assert message in str(exc.value)


def test_a_missing_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(errors.PodManifestError, match=r"missing\.yaml: cannot read"):
        client.load_manifest(tmp_path / "missing.yaml")


def test_json_manifests_are_read_too(tmp_path: Path) -> None:
    path = tmp_path / "pod.json"
    path.write_text(
        '{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [{"name": "c"}]}}'
    )
    assert client.load_manifest(path)["metadata"] == {"name": "p"}


@pytest.mark.parametrize(
    ("target", "parsed"),
    [("ns/p", ("ns", "p")), ("p", ("default", "p"))],
    ids=["namespaced", "default-namespace"],
)
def test_pod_targets_are_namespace_slash_name(target: str, parsed: tuple[str, str]) -> None:
    assert client.split_target(target) == parsed


@pytest.mark.parametrize("target", ["/p", "ns/", "a/b/c", ""], ids=["no-namespace", "no-name", "two-slashes", "empty"])
def test_malformed_targets_are_refused(target: str) -> None:
    with pytest.raises(ValueError, match="expected NAMESPACE/NAME"):
        client.split_target(target)


def test_the_control_socket_lives_in_the_emulators_own_directory_inside_the_socket_dir() -> None:
    assert client.control_socket("/var/lib/kubelet/device-plugins") == Path(
        "/var/lib/kubelet/device-plugins/.kubegpu-kubelet/control.sock"
    )
