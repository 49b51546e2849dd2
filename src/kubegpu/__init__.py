"""kubegpu: the Kubernetes GPU stack in Python.

Packages: ``api`` (wire formats), ``gpu`` (hardware model and backends),
``placement`` (which GPUs of a node to give a request), ``deviceplugin`` (the
node agent), ``kubelet`` (the kubelet emulator), ``scheduling`` (GPU-aware
scheduling and the trace simulator), ``monitoring`` (the exporter), and
``cli`` (the one entry point). See ``../shared/design.md`` for the rules
between them; import-linter enforces them in CI.
"""

__version__ = "0.1.0"
