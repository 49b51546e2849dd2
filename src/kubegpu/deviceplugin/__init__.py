"""The node agent: NVIDIA k8s-device-plugin compatible device plugin, in layers.

From the top: :mod:`.plugin` (the gRPC servers, registration, supervisor,
watchers, metrics and ``kubegpu plugin``; the only part that imports ``grpc``),
then the side services :mod:`.cdi` (CDI specs, ``kubegpu cdi``), :mod:`.mps`
(MPS control daemons, ``kubegpu mps-daemon``) and :mod:`.gfd` (node labels,
``kubegpu labels``), then :mod:`.rm` (pure: naming, resources, allocation,
responses, health policy), then :mod:`.config` (flags, env, file). At the
bottom :mod:`.naming` (how device IDs and resource names are spelled),
:mod:`.errors`, :mod:`.atomicfile` and :mod:`.signals`, which every layer may
use. import-linter enforces the order. Imports only :mod:`kubegpu.gpu`,
:mod:`kubegpu.placement`, :mod:`kubegpu.common` and :mod:`kubegpu.api`; never
the kubelet emulator or monitoring.
"""
