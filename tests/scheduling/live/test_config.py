"""KubeSchedulerConfiguration parsing: the tutorial's file, plugin names, errors naming the key."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from kubegpu.scheduling.live import config

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "deploy/helm/kubegpu/files/scheduler-config.yaml"


def _doc(**profile: Any) -> dict[str, Any]:
    return {"apiVersion": config.API_VERSION, "kind": config.KIND, "profiles": [{"schedulerName": "p", **profile}]}


def test_the_shipped_example_is_the_built_in_default() -> None:
    parsed = config.parse(yaml.safe_load(EXAMPLE.read_text()))
    assert parsed.profiles == config.default_config().profiles
    assert parsed.leader_election == config.LeaderElection()
    (profile,) = parsed.profiles
    fit, weight = profile.scorers[0]
    assert (profile.scheduler_name, fit.strategy, weight) == ("gpu-scheduler", "MostAllocated", 1)
    assert [(r.name, r.weight) for r in fit.resources] == [("nvidia.com/gpu", 100), ("cpu", 1), ("memory", 1)]


def test_score_weights_filters_and_percentage() -> None:
    parsed = config.parse(
        {
            **_doc(
                plugins={
                    "score": {"enabled": [{"name": "NodeResourcesFit", "weight": 5}]},
                    "filter": {"disabled": [{"name": "TaintToleration"}]},
                },
                pluginConfig=[
                    {
                        "name": "NodeResourcesFit",
                        "args": {
                            "scoringStrategy": {
                                "type": "RequestedToCapacityRatio",
                                "resources": [{"name": "nvidia.com/gpu", "weight": 3}],
                                "requestedToCapacityRatio": {
                                    "shape": [{"utilization": 0, "score": 0}, {"utilization": 100, "score": 10}]
                                },
                            }
                        },
                    }
                ],
            ),
            "percentageOfNodesToScore": 40,
        }
    )
    (profile,) = parsed.profiles
    assert profile.static_filters == ("NodeUnschedulable", "NodeName", "NodeAffinity")
    assert profile.percentage_of_nodes_to_score == 40
    fit, weight = profile.scorers[0]
    assert weight == 5 and fit.strategy == "RequestedToCapacityRatio" and fit.shape[-1].score == 10


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        (
            _doc(plugins={"score": {"enabled": [{"name": "NodeResourcesGPU", "weight": 100}]}}),
            'profiles[0].plugins.score.enabled[0].name: ScorePlugin "NodeResourcesGPU" does not exist',
        ),
        (
            _doc(plugins={"score": {"enabled": [{"name": "ImageLocality"}]}}),
            'profiles[0].plugins.score.enabled[0].name: plugin "ImageLocality" is a kube-scheduler plugin',
        ),
        (_doc(plugin={}), "profiles[0].plugin: unknown key"),
        (
            _doc(pluginConfig=[{"name": "NodeResourcesFit", "args": {"scoringStrategy": {"type": "Most"}}}]),
            "profiles[0].pluginConfig[0].args.scoringStrategy.type: unknown strategy 'Most'",
        ),
        (
            _doc(
                pluginConfig=[
                    {
                        "name": "NodeResourcesFit",
                        "args": {"scoringStrategy": {"resources": [{"name": "cpu", "weight": 0}]}},
                    }
                ]
            ),
            "profiles[0].pluginConfig[0].args.scoringStrategy.resources[0].weight: must be an integer within 1..100",
        ),
        ({**_doc(), "apiVersion": "kubescheduler.config.k8s.io/v1beta3"}, "apiVersion: must be"),
        (
            {**_doc(), "leaderElection": {"leaseDuration": "fifteen"}},
            "leaderElection.leaseDuration: must be a duration",
        ),
        ({**_doc(), "leaderElection": {"renewDeadline": "20s"}}, "leaderElection.leaseDuration: must be greater"),
        (
            {**_doc(), "profiles": [{"schedulerName": "a"}, {"schedulerName": "a"}]},
            "profiles[1].schedulerName: duplicate",
        ),
        ("just a string", "must be a mapping"),
    ],
    ids=[
        "missing-plugin",
        "unsupported-plugin",
        "unknown-key",
        "strategy",
        "weight",
        "api-version",
        "duration",
        "lease-order",
        "duplicate",
        "not-a-mapping",
    ],
)
def test_bad_config_names_the_key(doc: Any, message: str) -> None:
    with pytest.raises(config.ConfigError) as err:
        config.parse(doc)
    assert message in str(err.value)


@pytest.mark.parametrize(("text", "seconds"), [("15s", 15.0), ("1m30s", 90.0), ("500ms", 0.5), ("1h", 3600.0)])
def test_go_durations(text: str, seconds: float) -> None:
    assert config.parse_duration("x", text) == seconds


def test_kubegpu_policies_are_score_plugins() -> None:
    parsed = config.parse(
        _doc(plugins={"score": {"enabled": [{"name": "Lookahead", "weight": 10}], "disabled": [{"name": "*"}]}})
    )
    ((plugin, weight),) = parsed.profiles[0].scorers
    assert (plugin.name, weight) == ("Lookahead", 10)
    with pytest.raises(config.ConfigError, match=r'plugin "FGD" is a score plugin, not a filter plugin'):
        config.parse(_doc(plugins={"filter": {"enabled": [{"name": "FGD"}]}}))
