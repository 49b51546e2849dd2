"""Foundations every layer may import: the one document validator, Go durations, the one boolean parser.

Holds the few pieces of pure logic that more than one component needs and that
belong to none of them: :mod:`.validation` (checking decoded YAML/JSON against
frozen dataclasses; the device plugin's config, the CDI spec model and the
machine profiles use it), :mod:`.durations` (Go's ``time.Duration`` text),
:mod:`.boolean` (Go's ``strconv.ParseBool``, for flags and env vars), and :mod:`.inotify` (the
kernel's file-change events as an asyncio stream: the simulated backend's fault
journal and the plugin's kubelet socket; its one kind of I/O). Imports nothing
else of kubegpu, does no other I/O, and must not grow component knowledge: a
module that knows a GPU, a flag or a metric does not belong here.
"""
