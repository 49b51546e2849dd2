"""``kubegpu doctor``: the troubleshooting list as checks, each with what it saw and the fix.

``report`` (the Check record and its text/JSON forms), ``facts`` (pure: CUDA compatibility, image tags, container
runtime configs), ``node`` (checks on this node's files, sockets and GPUs), ``cluster`` (checks through the
Kubernetes API) and ``command`` (flags, order, exit codes).
"""
