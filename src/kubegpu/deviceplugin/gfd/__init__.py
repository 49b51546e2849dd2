"""GPU feature discovery: the node labels NVIDIA's GFD computes, and ``kubegpu labels``.

:mod:`.labels` computes the label set of a machine under a config (pure);
:mod:`.command` reads the machine, writes the NFD feature file and runs the
relabel loop. Builds on :mod:`kubegpu.deviceplugin.rm` for resource names;
must not serve gRPC.
"""
