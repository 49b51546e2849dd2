"""The Helm chart, rendered and linted by the real Helm library, validated strictly for Kubernetes 1.29 and the newest.

Every documented values combination (README, "Install on a cluster") renders, and every object it makes passes
kubernetes-validate in strict mode; the custom resources pass their CRD schemas. deploy/static/ is what the chart
renders by default, the PrometheusRule is deploy/alerts/ and the DaemonSets keep least privilege.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from tests.deploy import crd_schemas, helmrender

helm_sdkpy = pytest.importorskip("helm_sdkpy", reason="helm-sdkpy is installed by .ci/run (--ignore-requires-python)")
kubernetes_validate = pytest.importorskip("kubernetes_validate")

REPO = Path(__file__).resolve().parents[2]
KUBE_VERSIONS = ("1.29", str(kubernetes_validate.latest_version()))

TIME_SLICING = """version: v1
sharing:
  timeSlicing:
    resources:
      - name: nvidia.com/gpu
        replicas: 4
"""
MPS = """version: v1
sharing:
  mps:
    resources:
      - name: nvidia.com/gpu
        replicas: 4
"""

#: The values combinations README documents; each renders and validates.
COMBINATIONS: dict[str, dict[str, Any]] = {
    "defaults": {},
    "node-only": {"scheduler": {"enabled": False}},
    "scheduler-only": {"devicePlugin": {"enabled": False}, "gfd": {"enabled": False}, "exporter": {"enabled": False}},
    "named-configs": {
        "config": {"map": {"default": "version: v1\n", "time-sliced": TIME_SLICING}, "default": "default"}
    },
    "mps": {"config": {"map": {"mps": MPS}}},
    "mig-mixed-cdi": {"migStrategy": "mixed", "deviceListStrategy": "cdi-cri", "deviceIDStrategy": "index"},
    "cpu-manager": {"compatWithCPUManager": True, "failOnInitError": False, "devicePlugin": {"metricsPort": 9401}},
    "monitoring": {
        "exporter": {"serviceMonitor": {"enabled": True}, "collectIntervalMs": 1000, "hostnameLabel": "hostname"},
        "prometheusRule": {"enabled": True},
        "dashboard": {"enabled": True},
    },
    "everything": {
        "priorityClasses": {"enabled": True},
        "prometheusRule": {"enabled": True},
        "dashboard": {"enabled": True},
        "exporter": {"serviceMonitor": {"enabled": True}},
        "nodeAgent": {"enabled": True},
        "gfd": {"sleepInterval": "30s", "noTimestamp": True, "useNodeFeatureAPI": True},
        "config": {"map": {"mps": MPS, "plain": "version: v1\n"}, "default": "plain"},
    },
}

_rendered: dict[str, list[dict[str, Any]]] = {}


def rendered(name: str) -> list[dict[str, Any]]:
    if name not in _rendered:
        _rendered[name] = helmrender.render(COMBINATIONS[name])
    return _rendered[name]


def by_kind(objects: list[dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    return {o["metadata"]["name"]: o for o in objects if o["kind"] == kind}


def containers(obj: dict[str, Any]) -> list[dict[str, Any]]:
    spec = obj["spec"]["template"]["spec"]
    return [*spec.get("initContainers", []), *spec["containers"]]


def test_helm_lint_finds_no_warning_or_error() -> None:
    messages = helmrender.lint()
    assert [m for m in messages if m["Severity"] >= 2] == []


@pytest.mark.parametrize("combination", sorted(COMBINATIONS))
def test_every_object_validates_strictly_for_129_and_the_newest_kubernetes(combination: str) -> None:
    objects = rendered(combination)
    assert objects
    for obj in objects:
        key = (obj["apiVersion"], obj["kind"])
        if key in crd_schemas.SCHEMAS:
            jsonschema.validate(obj, crd_schemas.SCHEMAS[key])
            continue
        for version in KUBE_VERSIONS:
            try:
                kubernetes_validate.validate(obj, version, strict=True)
            except kubernetes_validate.ValidationError as exc:
                what = f"{combination}: {obj['kind']} {obj['metadata']['name']} for {version}"
                pytest.fail(f"{what}: {exc.message} at {list(exc.path)}")


def test_the_crd_schemas_reject_an_unknown_key_and_a_bad_duration() -> None:
    monitor = by_kind(rendered("monitoring"), "ServiceMonitor")["kubegpu-exporter"]
    schema = crd_schemas.SCHEMAS[("monitoring.coreos.com/v1", "ServiceMonitor")]
    typo = {**monitor, "spec": {**monitor["spec"], "endpoint": []}}
    with pytest.raises(jsonschema.ValidationError, match="endpoint"):
        jsonschema.validate(typo, schema)
    bad = {**monitor, "spec": {**monitor["spec"], "endpoints": [{"port": "metrics", "interval": "15 seconds"}]}}
    with pytest.raises(jsonschema.ValidationError, match="15 seconds"):
        jsonschema.validate(bad, schema)


def test_kubernetes_validate_rejects_an_unknown_field_in_strict_mode() -> None:
    daemonset = by_kind(rendered("defaults"), "DaemonSet")["kubegpu-device-plugin"]
    typo = {**daemonset, "spec": {**daemonset["spec"], "updateStrategyy": {}}}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(typo, "1.29", strict=True)


@pytest.mark.parametrize(
    ("values", "names"),
    [
        ({"migStrategy": "bogus"}, "/migStrategy"),
        ({"exporter": {"prot": 9400}}, "'prot'"),
        ({"deviceListStrategy": "envvar,cdi"}, "/deviceListStrategy"),
        ({"scheduler": {"replicas": 0}}, "/scheduler/replicas"),
        ({"config": {"fallbackStrategies": ["first"]}}, "/config/fallbackStrategies/0"),
        ({"devicePlugin": {"gpuMilli": "half"}}, "/devicePlugin/gpuMilli"),
    ],
    ids=["enum", "unknown-key", "strategy-list", "minimum", "fallback", "gpu-milli"],
)
def test_a_wrong_value_fails_at_install_naming_it(values: dict[str, Any], names: str) -> None:
    with pytest.raises(helm_sdkpy.InstallError, match=names):
        helmrender.render(values)


def test_a_kubernetes_older_than_129_is_refused() -> None:
    with pytest.raises(helm_sdkpy.InstallError, match="kubeVersion"):
        helmrender.render({}, kube_version="1.28")


def test_deploy_static_is_the_chart_rendered_with_its_defaults() -> None:
    wanted = helmrender.static_files(rendered("defaults"))
    present = {p.name: p.read_text() for p in helmrender.STATIC.glob("*.yaml")}
    assert sorted(present) == sorted(wanted), "regenerate with: python -m tests.deploy.helmrender"
    for name, text in wanted.items():
        assert present[name] == text, (
            f"deploy/static/{name} drifted; regenerate with: python -m tests.deploy.helmrender"
        )


def test_the_prometheus_rule_is_deploy_alerts_rules_file() -> None:
    rule = by_kind(rendered("monitoring"), "PrometheusRule")["kubegpu-rules"]
    source = yaml.safe_load((REPO / "deploy" / "alerts" / "kubegpu-rules.yaml").read_text())
    assert rule["spec"]["groups"] == source["groups"]


def test_the_dashboard_config_map_carries_the_dashboard_and_grafanas_sidecar_label() -> None:
    dashboard = by_kind(rendered("monitoring"), "ConfigMap")["kubegpu-dashboard"]
    assert dashboard["metadata"]["labels"]["grafana_dashboard"] == "1"
    source = (REPO / "deploy" / "dashboards" / "kubegpu-gpus.json").read_text()
    assert dashboard["data"]["kubegpu-gpus.json"] == source


def test_node_daemonsets_run_critical_on_gpu_nodes_only() -> None:
    for name, ds in by_kind(rendered("everything"), "DaemonSet").items():
        spec = ds["spec"]["template"]["spec"]
        assert spec["priorityClassName"] == "system-node-critical", name
        tolerations = {(t["key"], t.get("effect")) for t in spec["tolerations"]}
        assert {("CriticalAddonsOnly", None), ("nvidia.com/gpu", "NoSchedule")} <= tolerations, name
        terms = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
        keys = {e["key"] for term in terms for e in term["matchExpressions"]}
        assert keys == {"feature.node.kubernetes.io/pci-10de.present", "nvidia.com/gpu.present"}, name


@pytest.mark.parametrize("combination", ["defaults", "named-configs", "monitoring"])
def test_containers_have_least_privilege(combination: str) -> None:
    for name, workload in {
        **by_kind(rendered(combination), "DaemonSet"),
        **by_kind(rendered(combination), "Deployment"),
    }.items():
        for container in containers(workload):
            context = container["securityContext"]
            assert context["allowPrivilegeEscalation"] is False, (name, container["name"])
            assert context["readOnlyRootFilesystem"] is True, (name, container["name"])
            assert context["capabilities"] == {"drop": ["ALL"]}, (name, container["name"])
            assert "limits" in container["resources"] and "requests" in container["resources"]


def test_sys_admin_is_added_only_for_mig_and_volume_mounts_and_privileged_only_for_the_cpu_manager() -> None:
    def plugin_context(values: dict[str, Any]) -> dict[str, Any]:
        ds = by_kind(helmrender.render(values), "DaemonSet")["kubegpu-device-plugin"]
        context: dict[str, Any] = next(c for c in containers(ds) if c["name"] == "device-plugin")["securityContext"]
        return context

    assert plugin_context({"migStrategy": "mixed"})["capabilities"]["add"] == ["SYS_ADMIN"]
    assert plugin_context({"deviceListStrategy": "envvar,volume-mounts"})["capabilities"]["add"] == ["SYS_ADMIN"]
    assert "add" not in plugin_context({"migStrategy": "none"})["capabilities"]
    assert plugin_context({"compatWithCPUManager": True}) == {"privileged": True}


def test_nvidia_flags_become_env_vars_only_when_set() -> None:
    def env(values: dict[str, Any]) -> dict[str, str]:
        ds = by_kind(helmrender.render(values), "DaemonSet")["kubegpu-device-plugin"]
        plugin = next(c for c in containers(ds) if c["name"] == "device-plugin")
        return {e["name"]: e.get("value", "") for e in plugin["env"]}

    default = env({})
    assert not {"MIG_STRATEGY", "FAIL_ON_INIT_ERROR", "DEVICE_LIST_STRATEGY", "PASS_DEVICE_SPECS"} & set(default)
    chosen = env(
        {"migStrategy": "single", "failOnInitError": False, "deviceListStrategy": "cdi-cri", "gdsEnabled": True}
    )
    assert (chosen["MIG_STRATEGY"], chosen["FAIL_ON_INIT_ERROR"], chosen["DEVICE_LIST_STRATEGY"]) == (
        "single",
        "false",
        "cdi-cri",
    )
    assert chosen["GDS_ENABLED"] == "true"


def test_a_config_change_rolls_the_plugin_daemonset() -> None:
    def checksum(values: dict[str, Any]) -> str:
        ds = by_kind(helmrender.render(values), "DaemonSet")["kubegpu-device-plugin"]
        value: str = ds["spec"]["template"]["metadata"]["annotations"]["checksum/config"]
        return value

    one = checksum({"config": {"map": {"default": "version: v1\n"}}})
    assert one == checksum({"config": {"map": {"default": "version: v1\n"}}})
    assert one != checksum({"config": {"map": {"default": TIME_SLICING}}})


@pytest.mark.parametrize(
    ("values", "publish"),
    [
        ({}, True),
        ({"devicePlugin": {"publishGpus": False}}, False),
        ({"scheduler": {"enabled": False}}, False),
    ],
)
def test_with_the_scheduler_the_plugin_publishes_its_gpus_with_just_the_rbac_it_needs(
    values: dict[str, Any], publish: bool
) -> None:
    objects = helmrender.render(values)
    ds = by_kind(objects, "DaemonSet")["kubegpu-device-plugin"]
    pod = ds["spec"]["template"]["spec"]
    (plugin,) = (c for c in pod["containers"] if c["name"] == "device-plugin")
    env = {e["name"]: e for e in plugin["env"]}
    roles = by_kind(objects, "ClusterRole")
    if not publish:
        assert "KUBEGPU_NODE_NAME" not in env and "kubegpu-device-plugin" not in roles
        assert pod["automountServiceAccountToken"] is False and "serviceAccountName" not in pod
        return
    assert env["KUBEGPU_NODE_NAME"]["valueFrom"] == {"fieldRef": {"fieldPath": "spec.nodeName"}}
    assert pod["serviceAccountName"] == "kubegpu-device-plugin" and "automountServiceAccountToken" not in pod
    granted = roles["kubegpu-device-plugin"]["rules"]
    rules = {(r, v) for rule in granted for r in rule["resources"] for v in rule["verbs"]}
    assert rules == {("nodes", "patch"), ("pods", "list"), ("pods", "watch")}
    binding = by_kind(objects, "ClusterRoleBinding")["kubegpu-device-plugin"]
    account = {"kind": "ServiceAccount", "name": "kubegpu-device-plugin", "namespace": "kube-system"}
    assert binding["subjects"] == [account]
    assert "kubegpu-device-plugin" in by_kind(objects, "ServiceAccount")


@pytest.mark.parametrize(("value", "env"), [(None, None), ("all", "all"), ("0,1,GPU-abc", "0,1,GPU-abc")])
def test_gpu_milli_becomes_the_plugins_env_only_when_set(value: str | None, env: str | None) -> None:
    ds = by_kind(helmrender.render({"devicePlugin": {"gpuMilli": value}}), "DaemonSet")["kubegpu-device-plugin"]
    (plugin,) = (c for c in ds["spec"]["template"]["spec"]["containers"] if c["name"] == "device-plugin")
    assert {e["name"]: e.get("value") for e in plugin["env"]}.get("GPU_MILLI") == env


def test_named_configs_run_the_config_manager_beside_the_plugin_with_nvidias_env() -> None:
    objects = rendered("named-configs")
    ds = by_kind(objects, "DaemonSet")["kubegpu-device-plugin"]
    spec = ds["spec"]["template"]["spec"]
    assert spec["shareProcessNamespace"] is True
    names = [c["name"] for c in containers(ds)]
    assert names == ["config-manager-init", "device-plugin", "config-manager"]
    sidecar = {e["name"]: e.get("value") for e in containers(ds)[2]["env"]}
    assert sidecar["NODE_LABEL"] == "nvidia.com/device-plugin.config"
    assert sidecar["PROCESS_TO_SIGNAL"] == "nvidia-device-plugin"
    assert sidecar["DEFAULT_CONFIG"] == "default"
    assert by_kind(objects, "ConfigMap")["kubegpu-device-plugin-configs"]["data"]["time-sliced"] == TIME_SLICING
    role = by_kind(objects, "ClusterRole")["kubegpu-config-manager"]
    assert role["rules"] == [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "watch"]}]


def test_the_mps_daemon_runs_only_when_a_config_shares_with_mps() -> None:
    assert "kubegpu-mps-control-daemon" not in by_kind(rendered("named-configs"), "DaemonSet")
    daemonsets = by_kind(rendered("mps"), "DaemonSet")
    daemon = daemonsets["kubegpu-mps-control-daemon"]
    assert daemon["spec"]["template"]["spec"]["hostPID"] is True
    mounts = daemon["spec"]["template"]["spec"]["initContainers"][0]
    assert mounts["command"] == ["mps-control-daemon", "mount-shm"]
    assert mounts["volumeMounts"] == [{"name": "mps-root", "mountPath": "/mps", "mountPropagation": "Bidirectional"}]
    assert "env" not in mounts
    plugin = next(c for c in containers(daemonsets["kubegpu-device-plugin"]) if c["name"] == "device-plugin")
    assert {"name": "MPS_ROOT", "value": "/run/nvidia/mps"} in plugin["env"]


def test_mps_follows_nvidias_layout_host_root_at_mps_and_its_shm_at_dev_shm() -> None:
    """As NVIDIA's chart: the host's mps.root is /mps in the plugin and the daemon, <root>/shm their /dev/shm; only
    the plugin is told the host path (MPS_ROOT), to put it into clients' mounts."""
    daemonsets = by_kind(rendered("mps"), "DaemonSet")
    pods = (("kubegpu-device-plugin", "device-plugin"), ("kubegpu-mps-control-daemon", "mps-control-daemon"))
    for name, container in pods:
        spec = daemonsets[name]["spec"]["template"]["spec"]
        volumes = {v["name"]: v for v in spec["volumes"]}
        assert volumes["mps-root"]["hostPath"] == {"path": "/run/nvidia/mps", "type": "DirectoryOrCreate"}
        assert volumes["mps-shm"]["hostPath"] == {"path": "/run/nvidia/mps/shm"}
        (main,) = [c for c in spec["containers"] if c["name"] == container]
        mounted = {m["name"]: m["mountPath"] for m in main["volumeMounts"]}
        assert (mounted["mps-root"], mounted["mps-shm"]) == ("/mps", "/dev/shm")
    daemon = next(c for c in containers(daemonsets["kubegpu-mps-control-daemon"]) if c["name"] == "mps-control-daemon")
    assert all(e["name"] != "MPS_ROOT" for e in daemon["env"])


def test_the_scheduler_runs_two_leader_elected_replicas() -> None:
    objects = rendered("defaults")
    deployment = by_kind(objects, "Deployment")["kubegpu-scheduler"]
    assert deployment["spec"]["replicas"] == 2
    args = containers(deployment)[0]["args"]
    assert "--leader-elect=true" in args and "--leader-elect-resource-namespace=kube-system" in args
    role = by_kind(objects, "Role")["kubegpu-scheduler-leader-election"]
    assert {
        "apiGroups": ["coordination.k8s.io"],
        "resources": ["leases"],
        "resourceNames": ["kubegpu-scheduler"],
        "verbs": ["get", "update"],
    } in role["rules"]


def test_the_node_agent_is_not_deployed_unless_asked() -> None:
    assert "kubegpu-node-agent" not in by_kind(rendered("defaults"), "Deployment")
    assert "kubegpu-node-agent" in by_kind(rendered("everything"), "Deployment")


def test_the_tutorials_priority_classes() -> None:
    classes = by_kind(rendered("everything"), "PriorityClass")
    assert {name: pc["value"] for name, pc in classes.items()} == {"gpu-training-high": 1000, "gpu-inference-low": 500}


def test_notes_say_what_to_check_next() -> None:
    notes = helmrender.render_release({})["info"]["notes"]
    assert "kubectl -n kube-system get pods -l app.kubernetes.io/component=device-plugin" in notes
    assert "kubegpu doctor" in notes
