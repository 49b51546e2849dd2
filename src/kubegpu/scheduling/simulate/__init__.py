"""The trace simulator: ``kubegpu simulate`` — the Alibaba trace reader, trace variants, the replay protocol of the FGD
paper, synthetic workloads and the reports (tables, CSV/JSON series, plots).

It drives ``scheduling.core``; it must not talk to the Kubernetes API (that is ``scheduling.live``).
"""
