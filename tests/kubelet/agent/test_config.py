"""The agent's kubelet-named flags: labels, taints, durations and resource lists, and their error texts."""

from __future__ import annotations

import pytest

from kubegpu.kubelet.agent import config
from kubegpu.kubelet.agent.config import Taint


def test_labels_are_parsed_in_order_and_an_empty_value_is_allowed() -> None:
    assert config.parse_labels("a=1, example.com/gpu-pool=train,empty=") == {
        "a": "1",
        "example.com/gpu-pool": "train",
        "empty": "",
    }
    assert config.parse_labels("") == {}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("novalue", "--node-labels: 'novalue' must be key=value"),
        ("Bad_Prefix/x=1", "invalid label key 'Bad_Prefix/x': prefix part must be a DNS-1123 subdomain"),
        ("-x=1", "invalid label key '-x'"),
        ("x=-bad", "invalid label value '-bad' of 'x'"),
        ("x=" + "v" * 64, "invalid label value"),
    ],
    ids=["no-equals", "bad-prefix", "bad-name", "bad-value", "long-value"],
)
def test_bad_labels_name_the_flag_and_the_part_at_fault(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=r"^--node-labels") as err:
        config.parse_labels(text)
    assert message in str(err.value)


def test_taints_take_key_value_effect_and_key_effect() -> None:
    assert config.parse_taints("nvidia.com/gpu=present:NoSchedule,dedicated:NoExecute") == (
        Taint("nvidia.com/gpu", "present", "NoSchedule"),
        Taint("dedicated", "", "NoExecute"),
    )
    assert Taint("dedicated", "", "NoExecute").to_json() == {"key": "dedicated", "effect": "NoExecute"}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("gpu=yes", "invalid taint spec 'gpu=yes': must be key[=value]:effect"),
        ("gpu=yes:Sometimes", "invalid taint effect 'Sometimes'"),
        ("=yes:NoSchedule", "invalid taint key ''"),
    ],
    ids=["no-effect", "bad-effect", "no-key"],
)
def test_bad_taints_name_the_flag(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=r"^--register-with-taints") as err:
        config.parse_taints(text)
    assert message in str(err.value)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("10s", 10.0), ("1m30s", 90.0), ("500ms", 0.5), ("2h", 7200.0), ("1.5", 1.5), ("1m0.5s", 60.5)],
)
def test_durations_are_go_durations_or_seconds(text: str, seconds: float) -> None:
    assert config.parse_duration(text, "--x") == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "ten", "10 s", "10sm", "0s", "-1"])
def test_bad_or_non_positive_durations_are_refused_naming_the_flag(text: str) -> None:
    with pytest.raises(ValueError, match=r"^--node-status-update-frequency: "):
        config.parse_duration(text, "--node-status-update-frequency")


def test_resource_lists_keep_quantities_as_written_and_check_them() -> None:
    assert config.parse_resources("cpu=63500m,memory=1Ti", "--capacity") == {"cpu": "63500m", "memory": "1Ti"}
    with pytest.raises(ValueError, match=r"^--kube-reserved: memory: 'lots' is not a quantity"):
        config.parse_resources("memory=lots", "--kube-reserved")
    with pytest.raises(ValueError, match=r"^--capacity: 'cpu' must be resource=quantity"):
        config.parse_resources("cpu", "--capacity")


def test_the_lease_is_renewed_every_quarter_of_its_duration_as_the_kubelet_does() -> None:
    cfg = config.AgentConfig(node_name="n")
    assert (cfg.lease_duration, cfg.lease_renew_interval) == (40, 10.0)
    assert (cfg.status_update_frequency, cfg.status_report_frequency) == (10.0, 300.0)
