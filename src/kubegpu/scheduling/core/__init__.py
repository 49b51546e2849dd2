"""The scheduling core: cluster state, filter and score plugins, policies (FGD, lookahead, baselines, NodeResourcesFit),
gangs, preemption and exact-GPU choice — pure logic over plain values.

The simulator (``scheduling.simulate``) and the live scheduler (``scheduling.live``) both run on it. It must not import
a Kubernetes client, open files or sockets, read clocks or start threads (import-linter contracts say so).
"""
