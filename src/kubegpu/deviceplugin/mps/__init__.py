"""MPS sharing: the control daemons of MPS-shared resources and ``kubegpu mps-daemon``.

:mod:`.sharing` plans one ``nvidia-cuda-mps-control`` per MPS-shared resource
(pure), :mod:`.control` runs it and checks readiness, :mod:`.command` is the
daemon's command line and life. What an
Allocate answer mounts for MPS is :mod:`kubegpu.deviceplugin.rm.responses`'.
Must not serve gRPC.
"""
