"""Foundations every layer may import: checking decoded documents against frozen dataclasses.

Holds the few pieces of pure logic that more than one component needs and that
belong to none of them (the config-file validator used by the device plugin's
config, the CDI spec model and the machine profiles). Imports nothing else of
kubegpu, does no I/O, and must not grow component knowledge: a module that
knows a GPU, a flag or a metric does not belong here.
"""
