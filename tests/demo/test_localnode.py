"""The local node harness: what a caller learns when a process fails, and that nothing is left behind."""

from __future__ import annotations

import pytest

from kubegpu.demo.localnode import LocalNode, NodeError

pytestmark = pytest.mark.e2e


def test_a_process_that_exits_at_start_is_an_error_carrying_its_exit_code_and_log() -> None:
    with LocalNode(kubelet_args=["--no-such-flag"]) as node:
        with pytest.raises(NodeError) as caught:
            node.start_kubelet()
        assert "kubelet exited with 2" in str(caught.value)
        assert "unrecognized arguments: --no-such-flag" in str(caught.value)


def test_a_cli_wait_that_times_out_names_the_last_status_and_carries_every_log() -> None:
    with LocalNode() as node:
        node.start_kubelet()
        with pytest.raises(TimeoutError) as caught:
            node.wait_for(lambda s: False, timeout=1.0, cli=True)
        assert "last: {" in str(caught.value) and "--- kubelet log ---" in str(caught.value)
        assert node.cli_status()["resources"] == {}


def test_a_log_line_waited_for_is_returned_and_a_process_dying_first_is_an_error() -> None:
    with LocalNode(machine="no-such-machine") as node:
        plugin = node.start_plugin()  # says which profile is unknown and exits 2
        line = node.wait_log("plugin", "unknown machine profile", timeout=60)
        assert "'no-such-machine'" in line
        assert plugin.wait(60) == 2
        with pytest.raises(NodeError, match="plugin exited with 2"):
            node.wait_log("plugin", "this line is never written", timeout=60)


def test_close_stops_every_process_and_removes_the_directory() -> None:
    node = LocalNode()
    node.start_kubelet()
    kubelet = node.procs["kubelet"]
    node.close()
    assert kubelet.poll() is not None
    assert not node.root.exists()
    assert node.procs == {}
