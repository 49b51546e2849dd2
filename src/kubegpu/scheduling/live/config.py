"""The scheduler's configuration: a ``KubeSchedulerConfiguration`` (``kubescheduler.config.k8s.io/v1``) file.

Owns parsing and validating the file into :class:`SchedulerConfig` (profiles
with their filters, weighted score plugins and NodeResourcesFit scoring
strategy; percentageOfNodesToScore; pod backoff; leader election) and the
built-in default, the tutorial's ``gpu-scheduler`` profile. Every error is a
:class:`ConfigError` naming the key path. Besides kube-scheduler's plugins,
kubegpu's own policies are score plugins: ``Lookahead`` and ``FGD``
(:mod:`corepolicies`), and ``GPUTopology`` (:class:`scoring.GpuTopology`, the
interconnect of the GPUs chosen on nodes that publish them). Plugin names follow kube-scheduler:
a name kube-scheduler does not have is an error (``ScorePlugin
"NodeResourcesGPU" does not exist``), and so is a kube-scheduler plugin this
scheduler does not run, when it is enabled. Must not read files (the command
does) nor start anything.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from kubegpu.scheduling.core import noderesources
from kubegpu.scheduling.core.errors import SchedulingError
from kubegpu.scheduling.core.noderesources import ShapePoint
from kubegpu.scheduling.live import corepolicies, filters
from kubegpu.scheduling.live.cycle import Profile
from kubegpu.scheduling.live.scoring import (
    DEFAULT_RESOURCES,
    GpuTopology,
    LiveScorePlugin,
    NodeResourcesFit,
    ResourceWeight,
)

API_VERSION = "kubescheduler.config.k8s.io/v1"
KIND = "KubeSchedulerConfiguration"
DEFAULT_SCHEDULER_NAME = "gpu-scheduler"

#: kube-scheduler's in-tree plugins (v1.36). Names outside this set and ours do not exist.
KUBE_SCHEDULER_PLUGINS = frozenset(
    {
        "PrioritySort", "DefaultBinder", "DefaultPreemption", "SchedulingGates", "NodeUnschedulable", "NodeName",
        "TaintToleration", "NodeAffinity", "NodePorts", "NodeResourcesFit", "NodeResourcesBalancedAllocation",
        "VolumeRestrictions", "NodeVolumeLimits", "EBSLimits", "GCEPDLimits", "AzureDiskLimits", "VolumeBinding",
        "VolumeZone", "PodTopologySpread", "InterPodAffinity", "ImageLocality", "DynamicResources",
        "CinderLimits", "GangScheduling",
    }
)  # fmt: skip
#: Plugins this scheduler runs (filters; NodeResourcesFit filters and scores; the queue, preemption, binder).
SUPPORTED = frozenset(
    {*filters.STATIC_FILTERS, "NodeResourcesFit", "PrioritySort", "DefaultBinder", "DefaultPreemption"}
)
#: kubegpu's own score plugins: the core policies and the interconnect of the chosen GPUs.
GPU_TOPOLOGY = GpuTopology().name
OWN_SCORE_PLUGINS = (*corepolicies.POLICIES, GPU_TOPOLOGY)
#: Coscheduling's plugin name from scheduler-plugins: gangs are always on, naming it is allowed.
COSCHEDULING = "Coscheduling"
EXTENSION_POINTS = (
    "multiPoint", "queueSort", "preEnqueue", "preFilter", "filter", "postFilter", "preScore", "score",
    "reserve", "permit", "preBind", "bind", "postBind",
)  # fmt: skip
POINT_KIND = {"score": "ScorePlugin", "filter": "FilterPlugin", "preFilter": "PreFilterPlugin"}


class ConfigError(SchedulingError, ValueError):
    """A config value the scheduler cannot run with; the message starts with its key path."""

    def __init__(self, path: str, message: str) -> None:
        self.path = path
        super().__init__(f"{path}: {message}" if path else message)


@dataclass(frozen=True)
class LeaderElection:
    """client-go's leader-election settings and defaults (seconds)."""

    leader_elect: bool = True
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    resource_name: str = "kubegpu-scheduler"
    resource_namespace: str = "kube-system"

    def validate(self) -> None:
        if self.lease_duration <= self.renew_deadline:
            raise ConfigError("leaderElection.leaseDuration", "must be greater than renewDeadline")
        if self.renew_deadline <= self.retry_period * 1.2:
            raise ConfigError("leaderElection.renewDeadline", "must be greater than 1.2 x retryPeriod")
        if self.retry_period <= 0:
            raise ConfigError("leaderElection.retryPeriod", "must be greater than zero")


@dataclass(frozen=True)
class SchedulerConfig:
    profiles: tuple[Profile, ...]
    leader_election: LeaderElection = field(default_factory=LeaderElection)
    pod_initial_backoff_s: float = 1.0
    pod_max_backoff_s: float = 10.0

    def profile(self, scheduler_name: str) -> Profile | None:
        for p in self.profiles:
            if p.scheduler_name == scheduler_name:
                return p
        return None


#: The tutorial's profile: NodeResourcesFit MostAllocated with nvidia.com/gpu weighing 100 against cpu/memory 1.
TUTORIAL_RESOURCES = (ResourceWeight("nvidia.com/gpu", 100), ResourceWeight("cpu", 1), ResourceWeight("memory", 1))


def default_config() -> SchedulerConfig:
    """What runs without ``--config``: the tutorial's ``gpu-scheduler`` profile."""
    fit = NodeResourcesFit("MostAllocated", TUTORIAL_RESOURCES)
    return SchedulerConfig((Profile(DEFAULT_SCHEDULER_NAME, scorers=((fit, 1),)),))


_DURATION = re.compile(r"(\d+(?:\.\d+)?)(h|ms|m|s|us|µs|ns)")
_UNIT = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}


def parse_duration(path: str, value: Any) -> float:
    """A Go duration string ("15s", "1m30s", "500ms") in seconds."""
    if not isinstance(value, str) or not value:
        raise ConfigError(path, f"must be a duration such as '15s', got {value!r}")
    pos, total = 0, 0.0
    for m in _DURATION.finditer(value):
        if m.start() != pos:
            break
        total += float(m.group(1)) * _UNIT[m.group(2)]
        pos = m.end()
    if pos != len(value):
        raise ConfigError(path, f"must be a duration such as '15s', got {value!r}")
    return total


def _mapping(path: str, value: Any, allowed: tuple[str, ...]) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ConfigError(path, f"must be a mapping, got {type(value).__name__}")
    for key in value:
        if key not in allowed:
            where = f"{path}.{key}" if path else str(key)
            raise ConfigError(where, f"unknown key (expected one of: {', '.join(allowed)})")
    return value


def _list(path: str, value: Any) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise ConfigError(path, f"must be a list, got {type(value).__name__}")
    return value


def _int(path: str, value: Any, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ConfigError(path, f"must be an integer within {low}..{high}, got {value!r}")
    return value


def _str(path: str, value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise ConfigError(path, f"must be a non-empty string, got {value!r}")
    return value


def _fit_args(path: str, args: Any) -> NodeResourcesFit:
    args = _mapping(path, args, ("kind", "apiVersion", "scoringStrategy", "ignoredResources", "ignoredResourceGroups"))
    strategy = _mapping(
        f"{path}.scoringStrategy", args.get("scoringStrategy"), ("type", "resources", "requestedToCapacityRatio")
    )
    kind = strategy.get("type", "LeastAllocated")
    if kind not in noderesources.STRATEGIES:
        raise ConfigError(
            f"{path}.scoringStrategy.type",
            f"unknown strategy {kind!r} (choose from {', '.join(noderesources.STRATEGIES)})",
        )
    weights: list[ResourceWeight] = []
    for i, item in enumerate(_list(f"{path}.scoringStrategy.resources", strategy.get("resources"))):
        where = f"{path}.scoringStrategy.resources[{i}]"
        item = _mapping(where, item, ("name", "weight"))
        weights.append(
            ResourceWeight(
                _str(f"{where}.name", item.get("name")), _int(f"{where}.weight", item.get("weight", 1), 1, 100)
            )
        )
    shape: tuple[ShapePoint, ...] = noderesources.DEFAULT_SHAPE
    ratio = _mapping(
        f"{path}.scoringStrategy.requestedToCapacityRatio", strategy.get("requestedToCapacityRatio"), ("shape",)
    )
    if ratio:
        points = []
        for i, item in enumerate(_list(f"{path}.scoringStrategy.requestedToCapacityRatio.shape", ratio.get("shape"))):
            where = f"{path}.scoringStrategy.requestedToCapacityRatio.shape[{i}]"
            item = _mapping(where, item, ("utilization", "score"))
            points.append(
                ShapePoint(
                    _int(f"{where}.utilization", item.get("utilization"), 0, 100),
                    _int(f"{where}.score", item.get("score"), 0, 10),
                )
            )
        try:
            noderesources.validate_shape(points)
        except ValueError as exc:
            raise ConfigError(f"{path}.scoringStrategy.requestedToCapacityRatio.shape", str(exc)) from exc
        shape = tuple(points)
    elif kind == "RequestedToCapacityRatio":
        raise ConfigError(f"{path}.scoringStrategy.requestedToCapacityRatio", "RequestedToCapacityRatio needs a shape")
    return NodeResourcesFit(kind, tuple(weights) or DEFAULT_RESOURCES, shape)


def _check_plugin(path: str, point: str, name: str, enabled: bool) -> None:
    if name == "*" and not enabled:
        return
    if name in OWN_SCORE_PLUGINS:
        if point not in ("score", "multiPoint", "pluginConfig"):
            raise ConfigError(path, f'plugin "{name}" is a score plugin, not a {point} plugin')
        return
    if name not in KUBE_SCHEDULER_PLUGINS and name != COSCHEDULING:
        raise ConfigError(path, f'{POINT_KIND.get(point, "plugin")} "{name}" does not exist')
    if enabled and name not in SUPPORTED and name != COSCHEDULING:
        raise ConfigError(path, f'plugin "{name}" is a kube-scheduler plugin that kubegpu scheduler does not run')


def _profile(path: str, raw: Any, top_percentage: int) -> Profile:
    raw = _mapping(path, raw, ("schedulerName", "plugins", "pluginConfig", "percentageOfNodesToScore"))
    name = _str(f"{path}.schedulerName", raw.get("schedulerName", "default-scheduler"))
    percentage = top_percentage
    if "percentageOfNodesToScore" in raw:
        percentage = _int(f"{path}.percentageOfNodesToScore", raw["percentageOfNodesToScore"], 0, 100)
    plugins = _mapping(f"{path}.plugins", raw.get("plugins"), EXTENSION_POINTS)
    static = list(filters.STATIC_FILTERS)
    resource_filter = True
    score_weights: dict[str, int] = {"NodeResourcesFit": 1}
    for point, sets in plugins.items():
        where = f"{path}.plugins.{point}"
        sets = _mapping(where, sets, ("enabled", "disabled"))
        for i, item in enumerate(_list(f"{where}.disabled", sets.get("disabled"))):
            item = _mapping(f"{where}.disabled[{i}]", item, ("name", "weight"))
            plugin = _str(f"{where}.disabled[{i}].name", item.get("name"))
            _check_plugin(f"{where}.disabled[{i}].name", point, plugin, False)
            if point in ("filter", "multiPoint"):
                if plugin == "*":
                    static, resource_filter = [], False
                elif plugin in static:
                    static.remove(plugin)
                elif plugin == "NodeResourcesFit":
                    resource_filter = False
            if point in ("score", "multiPoint"):
                if plugin == "*":
                    score_weights.clear()
                else:
                    score_weights.pop(plugin, None)
        for i, item in enumerate(_list(f"{where}.enabled", sets.get("enabled"))):
            item = _mapping(f"{where}.enabled[{i}]", item, ("name", "weight"))
            plugin = _str(f"{where}.enabled[{i}].name", item.get("name"))
            _check_plugin(f"{where}.enabled[{i}].name", point, plugin, True)
            if point in ("filter", "multiPoint"):
                if plugin in filters.STATIC_FILTERS and plugin not in static:
                    static.append(plugin)
                elif plugin == "NodeResourcesFit":
                    resource_filter = True
            if point in ("score", "multiPoint") and (plugin == "NodeResourcesFit" or plugin in OWN_SCORE_PLUGINS):
                score_weights[plugin] = _int(f"{where}.enabled[{i}].weight", item.get("weight", 1), 1, 100)
            elif point == "score" and plugin != COSCHEDULING:
                raise ConfigError(f"{where}.enabled[{i}].name", f'ScorePlugin "{plugin}" is not a score plugin')
    fit = NodeResourcesFit()
    for i, item in enumerate(_list(f"{path}.pluginConfig", raw.get("pluginConfig"))):
        where = f"{path}.pluginConfig[{i}]"
        item = _mapping(where, item, ("name", "args"))
        plugin = _str(f"{where}.name", item.get("name"))
        _check_plugin(f"{where}.name", "pluginConfig", plugin, False)
        if plugin == "NodeResourcesFit":
            fit = _fit_args(f"{where}.args", item.get("args"))
    order = [f for f in filters.STATIC_FILTERS if f in static]
    scorers: list[tuple[LiveScorePlugin, int]] = []
    if "NodeResourcesFit" in score_weights:
        scorers.append((fit, score_weights["NodeResourcesFit"]))
    for policy in corepolicies.POLICIES:
        if policy in score_weights:
            scorers.append((corepolicies.CorePolicyScore(policy), score_weights[policy]))
    if GPU_TOPOLOGY in score_weights:
        scorers.append((GpuTopology(), score_weights[GPU_TOPOLOGY]))
    return Profile(name, tuple(order), resource_filter, tuple(scorers), percentage)


def parse(raw: Any) -> SchedulerConfig:
    """A parsed YAML document as a validated configuration."""
    top = _mapping(
        "",
        raw,
        (
            "apiVersion", "kind", "profiles", "leaderElection", "percentageOfNodesToScore", "parallelism",
            "podInitialBackoffSeconds", "podMaxBackoffSeconds", "clientConnection", "enableProfiling",
            "enableContentionProfiling", "delayCacheUntilActive",
        ),
    )  # fmt: skip
    if top.get("apiVersion") != API_VERSION:
        raise ConfigError("apiVersion", f"must be {API_VERSION}, got {top.get('apiVersion')!r}")
    if top.get("kind") != KIND:
        raise ConfigError("kind", f"must be {KIND}, got {top.get('kind')!r}")
    percentage = _int("percentageOfNodesToScore", top.get("percentageOfNodesToScore", 0), 0, 100)
    raw_profiles = _list("profiles", top.get("profiles"))
    profiles = tuple(_profile(f"profiles[{i}]", p, percentage) for i, p in enumerate(raw_profiles))
    if not profiles:
        profiles = (Profile("default-scheduler", percentage_of_nodes_to_score=percentage),)
    names = [p.scheduler_name for p in profiles]
    for i, n in enumerate(names):
        if n in names[:i]:
            raise ConfigError(f"profiles[{i}].schedulerName", f"duplicate profile name {n!r}")
    initial = _int("podInitialBackoffSeconds", top.get("podInitialBackoffSeconds", 1), 1, 86400)
    maximum = _int("podMaxBackoffSeconds", top.get("podMaxBackoffSeconds", 10), 1, 86400)
    if maximum < initial:
        raise ConfigError("podMaxBackoffSeconds", f"must not be below podInitialBackoffSeconds ({initial})")
    le = _mapping(
        "leaderElection",
        top.get("leaderElection"),
        (
            "leaderElect",
            "leaseDuration",
            "renewDeadline",
            "retryPeriod",
            "resourceLock",
            "resourceName",
            "resourceNamespace",
        ),
    )
    defaults = LeaderElection()
    if le.get("resourceLock", "leases") != "leases":
        raise ConfigError("leaderElection.resourceLock", f"only 'leases' is supported, got {le['resourceLock']!r}")
    elect = le.get("leaderElect", True)
    if not isinstance(elect, bool):
        raise ConfigError("leaderElection.leaderElect", f"must be true or false, got {elect!r}")
    election = LeaderElection(
        leader_elect=elect,
        lease_duration=parse_duration("leaderElection.leaseDuration", le["leaseDuration"])
        if "leaseDuration" in le
        else defaults.lease_duration,
        renew_deadline=parse_duration("leaderElection.renewDeadline", le["renewDeadline"])
        if "renewDeadline" in le
        else defaults.renew_deadline,
        retry_period=parse_duration("leaderElection.retryPeriod", le["retryPeriod"])
        if "retryPeriod" in le
        else defaults.retry_period,
        resource_name=_str("leaderElection.resourceName", le.get("resourceName", defaults.resource_name)),
        resource_namespace=_str(
            "leaderElection.resourceNamespace", le.get("resourceNamespace", defaults.resource_namespace)
        ),
    )
    election.validate()
    return SchedulerConfig(profiles, election, float(initial), float(maximum))
