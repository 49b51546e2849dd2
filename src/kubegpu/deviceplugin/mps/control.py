"""MPS control daemons: one ``nvidia-cuda-mps-control`` per MPS-shared resource, as NVIDIA's daemon runs them.

Owns the :class:`Daemon` that carries out a :class:`~.sharing.DaemonPlan` through
injectable commands: compute mode
``EXCLUSIVE_PROCESS`` via ``nvidia-smi``, ``nvidia-cuda-mps-control -d``, the
``set_default_*`` commands on its stdin, the ``.started`` file, the health
query, and ``quit`` + compute mode ``DEFAULT`` on stop; and the check the
plugin makes before and while serving an MPS resource (the ``.ready``/``.started``
files, then the control pipe answering: :class:`DaemonCheck`). Must not decide
what a daemon is (that is :mod:`.sharing`, pure) or Allocate responses
(``responses`` mounts the pipe directory into containers).
"""

from __future__ import annotations

import contextlib
import logging
import os
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from kubegpu.deviceplugin.errors import DevicePluginError
from kubegpu.deviceplugin.mps.sharing import PIPE_ENV, READY_FILE, STARTED_FILE, DaemonPlan, daemon_env

log = logging.getLogger(__name__)

CONTROL_PROGRAM = "nvidia-cuda-mps-control"
NVIDIA_SMI = "nvidia-smi"


class MpsError(DevicePluginError):
    """A control-program or nvidia-smi call failed; the message names the command and its output."""


@dataclass(frozen=True)
class Result:
    returncode: int
    stdout: str
    stderr: str


Runner = Callable[[Sequence[str], Mapping[str, str], str | None], Result]


def run_command(argv: Sequence[str], env: Mapping[str, str], stdin: str | None, timeout: float = 60.0) -> Result:
    """Run a program with ``env`` added to ours and ``stdin`` as its input (nothing: /dev/null)."""
    try:
        done = subprocess.run(
            list(argv),
            input=stdin,
            stdin=None if stdin is not None else subprocess.DEVNULL,
            env={**os.environ, **env},
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except FileNotFoundError:
        return Result(127, "", f"{argv[0]}: not found")
    except subprocess.TimeoutExpired:
        return Result(124, "", f"{argv[0]}: timed out")
    return Result(done.returncode, done.stdout, done.stderr)


class Daemon:
    """Runs one plan.

    Parameters:
        plan: the daemon to run.
        control: the ``nvidia-cuda-mps-control`` program.
        nvidia_smi: the ``nvidia-smi`` command (a list: a wrapper may need arguments); empty: leave compute modes.
        run: how programs are run (tests record calls here or point ``control`` at a fake program).
    """

    def __init__(
        self,
        plan: DaemonPlan,
        control: str = CONTROL_PROGRAM,
        nvidia_smi: Sequence[str] = (NVIDIA_SMI,),
        run: Runner = run_command,
    ) -> None:
        self.plan = plan
        self.control = control
        self.nvidia_smi = tuple(nvidia_smi)
        self._run = run

    def _call(self, argv: Sequence[str], stdin: str | None = None, env: Mapping[str, str] | None = None) -> str:
        result = self._run(argv, env or {}, stdin)
        if result.returncode != 0:
            what = " ".join(argv) + (f" <<< {stdin.strip()}" if stdin else "")
            detail = (result.stderr or result.stdout).strip()
            raise MpsError(f"{what}: exit {result.returncode}: {detail}")
        return result.stdout

    def _compute_mode(self, mode: str) -> None:
        if not self.nvidia_smi:
            return
        for gpu in self.plan.gpus:
            self._call([*self.nvidia_smi, "-i", gpu.uuid, "-c", mode])

    def send(self, command: str) -> str:
        """One control command on the daemon's pipe; returns its answer."""
        return self._call([self.control], stdin=command + "\n", env=self.plan.env)

    def start(self) -> None:
        """Exclusive compute mode, directories, ``-d``, the default limits, then ``.started``."""
        plan = self.plan
        server_up = False
        try:
            self._compute_mode("EXCLUSIVE_PROCESS")
            plan.pipe_dir.mkdir(parents=True, exist_ok=True)
            plan.log_dir.mkdir(parents=True, exist_ok=True)
            self._call([self.control, "-d"], env=plan.env)
            server_up = True
            for command in plan.commands():
                self.send(command)
        except MpsError:
            # Leave the GPUs as we found them: a half-started daemon must not keep them exclusive.
            with contextlib.suppress(MpsError):
                if server_up:
                    self.send("quit")
                self._compute_mode("DEFAULT")
            raise
        plan.started_file.touch()
        log.info(
            "MPS daemon started",
            extra={"resource": plan.resource, "replicas": plan.replicas, "gpus": [g.index for g in plan.gpus]},
        )

    def healthy(self) -> bool:
        """Whether the daemon answers with the active-thread percentage it was given."""
        try:
            answer = self.send("get_default_active_thread_percentage").strip()
        except MpsError:
            return False
        try:
            return float(answer) == float(self.plan.active_thread_percentage)
        except ValueError:
            return False

    def stop(self) -> None:
        """``quit``, compute mode back to ``DEFAULT``, ``.started`` and the log directory removed.

        Every step runs even if an earlier one failed; the first failure is raised at the end.
        """
        errors: list[MpsError] = []
        for step in (lambda: self.send("quit"), lambda: self._compute_mode("DEFAULT")):
            try:
                step()
            except MpsError as exc:
                errors.append(exc)
        with contextlib.suppress(FileNotFoundError):
            self.plan.started_file.unlink()
        import shutil  # only when a daemon is stopped: not on the plugin's start path

        shutil.rmtree(self.plan.log_dir, ignore_errors=True)
        log.info("MPS daemon stopped", extra={"resource": self.plan.resource})
        if errors:
            raise errors[0]


def ready_file(root: Path) -> Path:
    return root / READY_FILE


def readiness_problem(root: Path, resources: Sequence[str]) -> str | None:
    """Why the MPS daemons of ``resources`` are not ready under ``root`` (None when they are).

    Ready means what ``kubegpu mps-daemon`` writes after every daemon has its limits set:
    ``<root>/.ready`` and each resource's ``<root>/<resource>/.started``. The plugin checks this before it
    serves an MPS resource, as NVIDIA's plugin waits for its daemon.
    """
    if not resources:
        return None
    if not ready_file(root).exists():
        return (
            f"{ready_file(root)} does not exist: is the MPS control daemon running, "
            f"with the MPS root mounted at {root} in its container too?"
        )
    for resource in resources:
        started = root / resource / STARTED_FILE
        if not started.exists():
            return f"{started} does not exist: the MPS daemon of {resource} has not started"
    return None


#: How long the plugin's health query may take before the daemon counts as not answering.
CHECK_TIMEOUT_S = 10.0


def _check_runner(argv: Sequence[str], env: Mapping[str, str], stdin: str | None) -> Result:
    return run_command(argv, env, stdin, timeout=CHECK_TIMEOUT_S)


class DaemonCheck:
    """The plugin's check of the MPS daemons of ``resources``, as their clients see them under ``root``.

    :meth:`problem` asks for the readiness files (:func:`readiness_problem`), then sends each daemon
    ``get_default_active_thread_percentage`` on its control pipe (NVIDIA's ``AssertHealthy``): a daemon that
    died without removing its files shows here. Without the control program (not on ``PATH``, or not mounted
    into the plugin's container) only the files are checked, which is logged once. Blocking: the supervisor
    runs it in a worker thread.

    Parameters:
        root: the MPS root as this process sees it (``--mps-container-root``).
        resources: the MPS-shared resources served.
        control: the ``nvidia-cuda-mps-control`` program.
        run: how it is run (tests may inject a runner).
    """

    def __init__(
        self, root: Path, resources: Sequence[str], control: str = CONTROL_PROGRAM, run: Runner = _check_runner
    ) -> None:
        self.root = root
        self.resources = tuple(resources)
        self.control = control
        self._run = run
        #: False once the control program was not found: pipes are no longer asked.
        self.asks_pipes = True

    def problem(self) -> str | None:
        """Why the daemons cannot serve clients now, or None."""
        files = readiness_problem(self.root, self.resources)
        if files is not None or not self.asks_pipes:
            return files
        for resource in self.resources:
            env = daemon_env(self.root, resource)
            result = self._run([self.control], env, "get_default_active_thread_percentage\n")
            if result.returncode == 127:
                self.asks_pipes = False
                log.warning(
                    "cannot ask the MPS control daemon; checking its readiness files only",
                    extra={"program": self.control, "error": result.stderr.strip()},
                )
                return None
            if result.returncode != 0:
                detail = (result.stderr or result.stdout).strip() or f"exit {result.returncode}"
                return f"the MPS control daemon of {resource} does not answer on {env[PIPE_ENV]}: {detail}"
        return None
