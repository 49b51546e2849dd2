# kubegpu's image: every component (kubegpu plugin/labels/exporter/mps-daemon/scheduler/doctor) and NVIDIA's command
# names (nvidia-device-plugin, gpu-feature-discovery, mps-control-daemon, config-manager).
#   docker build -t kubegpu:0.1.0 .
# Stage 1 builds the wheel from this checkout and installs it into a venv; stage 2 is the slim runtime with that
# venv only (no compiler, no pip cache, no sources).

FROM python:3.11.11-slim-bookworm AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY src ./src
RUN python -m pip install build==1.2.2 \
 && python -m build --wheel --outdir /wheels . \
 && python -m venv /opt/kubegpu \
 && /opt/kubegpu/bin/pip install /wheels/kubegpu-*.whl \
 && /opt/kubegpu/bin/kubegpu --version

FROM python:3.11.11-slim-bookworm
LABEL org.opencontainers.image.title="kubegpu" \
      org.opencontainers.image.description="Kubernetes GPU stack: device plugin, GFD labels, dcgm-compatible exporter, MPS daemon, GPU-aware scheduler" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY --from=build /opt/kubegpu /opt/kubegpu
ENV PATH=/opt/kubegpu/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    NVIDIA_VISIBLE_DEVICES=all \
    NVIDIA_DRIVER_CAPABILITIES=compute,utility
# Non-root by default: the scheduler, the node agent and config-manager's init run as this user. The node
# DaemonSets set runAsUser 0 where they must own host paths: the plugin (the kubelet's root-owned device-plugin
# directory), GFD (NFD's features.d), the exporter (the root-owned pod-resources socket), config-manager's sidecar
# (to signal the root plugin) and the MPS daemon (privileged: compute modes through nvidia-smi).
USER 65532:65532
ENTRYPOINT []
CMD ["kubegpu", "--help"]
