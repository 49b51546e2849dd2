"""CDI specs: the Container Device Interface document model, building the plugin's specs, writing them.

:mod:`.schema` is the spec format as a strict model, :mod:`.generate` builds the
specs of a machine under a config (pure), :mod:`.hostfiles` finds on the host
what they mention, :mod:`.writer` writes them into the spec directory,
:mod:`.command` is ``kubegpu cdi``. Builds on :mod:`kubegpu.deviceplugin.rm`; must not serve gRPC.
"""
