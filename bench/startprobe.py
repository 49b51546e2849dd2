"""``python -m startprobe ARGS``: run ``kubegpu ARGS`` and, at its exit, write which kubegpu dataclasses it built.

The in-process half of ``bench/start_profile.py`` (found through ``PYTHONPATH=bench``). At exit it
writes to ``$KUBEGPU_PROBE_OUT`` one JSON object: the dataclasses defined by the kubegpu modules then
loaded (each compiled its generated methods at import) and the kubegpu modules. With
``$KUBEGPU_PROBE_CALLGRIND`` set to a file, it first replaces itself with ``valgrind --tool=callgrind``
running the same command (same PID), whose instruction count goes to that file. Must not change what
the command does.
"""

from __future__ import annotations

import atexit
import dataclasses
import json
import os
import runpy
import sys


def _report(path: str) -> None:
    modules = sorted(m for m in sys.modules if m == "kubegpu" or m.startswith("kubegpu."))
    classes = sorted(
        f"{name}.{attr}"
        for name in modules
        for attr, obj in vars(sys.modules[name]).items()
        if isinstance(obj, type) and dataclasses.is_dataclass(obj) and obj.__module__ == name
    )
    with open(path, "w", encoding="utf-8") as out:
        json.dump({"dataclasses": classes, "kubegpu_modules": modules}, out)


def main() -> None:
    callgrind = os.environ.pop("KUBEGPU_PROBE_CALLGRIND", "")
    if callgrind:
        command = [sys.executable, "-m", "startprobe", *sys.argv[1:]]
        os.execvp("valgrind", ["valgrind", "--tool=callgrind", f"--callgrind-out-file={callgrind}", *command])
    atexit.register(_report, os.environ["KUBEGPU_PROBE_OUT"])
    sys.argv = ["kubegpu", *sys.argv[1:]]
    runpy.run_module("kubegpu", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
