"""The device plugin's configuration: NVIDIA's ``version: v1`` file and the flags and env vars over it.

:mod:`.v1` is the file (its schema, parsing, NVIDIA's rules and texts, sharing
and resource patterns); :mod:`.effective` is the flag table, the precedence
(CLI > env > file > default), the checks NVIDIA makes at start and the frozen
:class:`~.effective.Config` every other layer reads. Pure apart from reading
the ``--config-file``; must not import anything of the device plugin above it.
"""
