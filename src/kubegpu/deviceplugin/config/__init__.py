"""The device plugin's configuration: every flag declared once, NVIDIA's ``version: v1`` file, the effective config.

:mod:`.flags` declares every flag once (file key, type, default, check, command-line
names, env vars, help, programs); :mod:`.v1` is the file (its schema, parsing,
NVIDIA's rules and texts, sharing and resource patterns), whose ``flags`` section is
checked against those declarations; :mod:`.effective` derives each program's flag
table, applies the precedence (CLI > env > file > default) in one function, makes
the checks NVIDIA makes at start and builds the frozen
:class:`~.effective.Config` every other layer reads. Pure apart from reading the
``--config-file``; must not import anything of the device plugin above it.
"""
