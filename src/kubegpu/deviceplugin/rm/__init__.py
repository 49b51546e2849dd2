"""The resource manager: pure domain logic of what the plugin advertises and hands out.

How devices, replicas and MIG devices are named and grouped into resources
(:mod:`.devices`, :mod:`.resources`, :mod:`.resource_map`), the preferred
allocation (:mod:`.preferred`), how Allocate builds a container's envs, mounts
and device nodes (:mod:`.responses`, from the settings in :mod:`.response_options`), the health policy (:mod:`.xids`,
:mod:`.health`) and the MIG capability table (:mod:`.mig_caps`). No gRPC, no
sockets, no clocks, no threads; tested with tables. Reads only
:mod:`kubegpu.deviceplugin.config`, :mod:`kubegpu.gpu` and :mod:`kubegpu.placement`.
"""
