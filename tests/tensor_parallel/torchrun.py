"""Launching a script on two local processes with torchrun, as a user would, from a test."""

from __future__ import annotations

import os
import pathlib
import socket
import subprocess
import sys

import mixgemm


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def torchrun(script: pathlib.Path, *args: str, nproc: int = 2, timeout: int = 600) -> subprocess.CompletedProcess:
    """``python -m torch.distributed.run --nproc-per-node nproc script args``, with the mixgemm this test
    imports first on the path (an installed one, or the source tree)."""
    env = dict(os.environ)
    package_root = str(pathlib.Path(mixgemm.__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join([package_root] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    command = [sys.executable, "-m", "torch.distributed.run", f"--nproc-per-node={nproc}",
               f"--master-port={free_port()}", str(script), *args]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout)
