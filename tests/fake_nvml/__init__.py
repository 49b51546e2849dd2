"""The fake ``libnvidia-ml.so.1`` (C sources, ``build.sh``) and its Python harness (``harness.py``)."""
