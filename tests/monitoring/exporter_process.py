"""Test helper: ``kubegpu exporter`` as a real process on a free loopback port, and scraping it."""

from __future__ import annotations

import gzip
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path

_LISTENING = re.compile(r'msg="exporter listening" address=(\S+):(\d+)')


class ExporterProcess:
    """Starts ``python -m kubegpu exporter ARGS --listen 127.0.0.1:0`` and learns its port from its log."""

    def __init__(self, args: Sequence[str], env: dict[str, str] | None = None, startup_timeout_s: float = 30.0):
        self.args = [sys.executable, "-m", "kubegpu", "exporter", "--listen", "127.0.0.1:0", *args]
        self.env = {**os.environ, **(env or {})}
        self.timeout = startup_timeout_s
        self.stderr_lines: list[str] = []
        self.port = 0
        self._ready = threading.Event()
        self.proc: subprocess.Popen[str] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _pump(self) -> None:
        assert self.proc is not None and self.proc.stderr is not None
        for line in self.proc.stderr:
            self.stderr_lines.append(line)
            match = _LISTENING.search(line)
            if match:
                self.port = int(match.group(2))
                self._ready.set()

    def start(self) -> ExporterProcess:
        self.proc = subprocess.Popen(
            self.args, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, env=self.env
        )
        threading.Thread(target=self._pump, daemon=True).start()
        deadline = time.monotonic() + self.timeout
        while not self._ready.wait(0.05):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise AssertionError(f"exporter did not start: {''.join(self.stderr_lines)}")
        return self

    def stop(self) -> int:
        if self.proc is None:
            return 0
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode

    def __enter__(self) -> ExporterProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def get(url: str, headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read()


def scrape(base_url: str) -> str:
    status, headers, body = get(base_url + "/metrics")
    assert status == 200, body
    if headers.get("Content-Encoding") == "gzip":
        body = gzip.decompress(body)
    return body.decode()


def fault(fault_file: Path, *args: str) -> None:
    subprocess.run(
        [sys.executable, "-m", "kubegpu", "fault", *args, "--fault-file", str(fault_file)],
        check=True,
        capture_output=True,
        timeout=60,
    )
