"""Utility components, ready to use: run a binary, a shell command or a python program,
copy a file, and small demo jobs (``echo``, ``touch``, ``booth``).

Arguments reach the program unchanged (each becomes one argv entry); only ``utils.sh``
goes through a shell, with every argument quoted.
"""
import os
import re
import shlex
from typing import Dict, List, Optional

import tx.specs as specs
from tx.components import DEFAULT_IMAGE
from tx.schedulers.ids import unreserved

__all__ = ["binary", "booth", "copy", "echo", "python", "sh", "touch"]


def _small() -> specs.Resource:
    return specs.Resource(cpu=1, gpu=0, memMB=1024)


def _program_app_name(m: Optional[str], script: Optional[str]) -> str:
    """The app name of what runs: ``--script dir/train.py`` -> ``train``, ``-m pkg.mod`` ->
    ``mod``, otherwise (``-c``) ``python``; characters an app name cannot hold become ``_``
    and it is cut to the 40 characters :func:`tx.specs.check_app_name` allows; a name tx keeps
    for run and sweep handles gets ``app-`` before it (``run.py`` -> ``app-run``,
    :func:`tx.schedulers.ids.unreserved`)."""
    stem = m.rpartition(".")[2] if m else os.path.splitext(os.path.basename(script or ""))[0]
    stem = re.sub(r"[^A-Za-z0-9_.-]", "_", stem).lstrip("_.-")[:40]
    return unreserved(stem) if stem else "python"


def echo(msg: str = "hello world", image: str = DEFAULT_IMAGE, num_replicas: int = 1) -> specs.AppDef:
    """Echoes a message to stdout (runs echo).

    Args:
        msg: the message to echo
        image: the image to run in
        num_replicas: how many replicas echo the message
    """
    return specs.AppDef(
        name="echo",
        roles=[
            specs.Role(
                name="echo",
                image=image,
                entrypoint="echo",
                args=[msg],
                num_replicas=num_replicas,
                resource=_small(),
            )
        ],
    )


def touch(file: str, image: str = DEFAULT_IMAGE) -> specs.AppDef:
    """Creates an empty file or updates its modification time (runs touch).

    Args:
        file: the file to touch
        image: the image to run in
    """
    return specs.AppDef(
        name="touch",
        roles=[
            specs.Role(
                name="touch",
                image=image,
                entrypoint="touch",
                args=[file],
                num_replicas=1,
                resource=_small(),
            )
        ],
    )


def sh(
    *args: str,
    image: str = DEFAULT_IMAGE,
    num_replicas: int = 1,
    cpu: int = 1,
    gpu: int = 0,
    memMB: int = 1024,
    h: Optional[str] = None,
    env: Optional[Dict[str, str]] = None,
    max_retries: int = 0,
    mounts: Optional[List[str]] = None,
    entrypoint: Optional[str] = None,
) -> specs.AppDef:
    """Runs a command through sh -c, each argument quoted as one word.

    The shell does not expand variables or operators in the arguments
    (tx run utils.sh echo '$HOME' prints $HOME).

    Args:
        args: the command and its arguments
        image: the image to run in
        num_replicas: how many replicas run the command
        cpu: CPUs per replica
        gpu: GPUs per replica
        memMB: memory per replica in MB
        h: a named resource (e.g. cpu.small); takes precedence over cpu, gpu and memMB
        env: environment variables (KEY=VALUE,KEY2=VALUE2)
        max_retries: how many times the scheduler may restart the job
        mounts: mounts into the job (type=bind,src=/host,dst=/job[,readonly])
        entrypoint: run this program with the arguments directly instead of sh -c
    """
    if not args and entrypoint is None:
        raise ValueError("no command given: tx run utils.sh COMMAND [ARGS...]")
    env = dict(env or {})
    env.setdefault("LOGLEVEL", os.getenv("LOGLEVEL", "WARNING"))
    if entrypoint is not None:
        program, argv = entrypoint, list(args)
    else:
        program, argv = "sh", ["-c", " ".join(shlex.quote(a) for a in args)]
    return specs.AppDef(
        name="sh",
        roles=[
            specs.Role(
                name="sh",
                image=image,
                entrypoint=program,
                args=argv,
                num_replicas=num_replicas,
                resource=specs.resource(cpu=cpu, gpu=gpu, memMB=memMB, h=h),
                env=env,
                max_retries=max_retries,
                mounts=specs.parse_mounts(mounts) if mounts else [],
            )
        ],
    )


def python(
    *args: str,
    m: Optional[str] = None,
    c: Optional[str] = None,
    script: Optional[str] = None,
    image: str = DEFAULT_IMAGE,
    name: Optional[str] = None,
    cpu: int = 1,
    gpu: int = 0,
    memMB: int = 1024,
    h: Optional[str] = None,
    num_replicas: int = 1,
    mounts: Optional[List[str]] = None,
) -> specs.AppDef:
    """Runs python with a module (-m), a command (-c) or a script.

    Put the program's own arguments after -- (tx run utils.python -m foo.main -- --lr 0.1).

    Args:
        args: arguments to the program (its sys.argv[1:])
        m: run this library module as a script (python -m)
        c: run this program text (python -c)
        script: run this .py script
        image: the image to run in
        name: the app name (default: what runs: the script's file name without ``.py``,
            the module's last part, or ``python`` for -c)
        cpu: CPUs per replica
        gpu: GPUs per replica
        memMB: memory per replica in MB
        h: a named resource (e.g. cpu.small); takes precedence over cpu, gpu and memMB
        num_replicas: how many copies to run
        mounts: mounts into the job (type=bind,src=/host,dst=/job[,readonly])
    """
    if sum(x is not None for x in (m, c, script)) != 1:
        raise ValueError("exactly one of -m, -c and --script must be specified")
    if script is not None:
        cmd = [script]
    elif m is not None:
        cmd = ["-m", m]
    else:
        cmd = ["-c", c or ""]
    return specs.AppDef(
        name=name if name is not None else _program_app_name(m, script),
        roles=[
            specs.Role(
                name="python",
                image=image,
                entrypoint="python",
                num_replicas=num_replicas,
                resource=specs.resource(cpu=cpu, gpu=gpu, memMB=memMB, h=h),
                args=[*cmd, *args],
                env={"HYDRA_MAIN_MODULE": m} if m else {},
                mounts=specs.parse_mounts(mounts) if mounts else [],
            )
        ],
    )


def binary(
    *args: str,
    entrypoint: str,
    name: str = "tx_utils_binary",
    num_replicas: int = 1,
    cpu: int = 1,
    gpu: int = 0,
    memMB: int = 1024,
    h: Optional[str] = None,
) -> specs.AppDef:
    """Runs a binary with arguments, with no image (the scheduler's host provides it).

    Args:
        args: arguments to the binary
        entrypoint: the binary to run (a path, or a name looked up on PATH)
        name: the app name
        num_replicas: how many copies to run
        cpu: CPUs per replica
        gpu: GPUs per replica
        memMB: memory per replica in MB
        h: a named resource (e.g. cpu.small); takes precedence over cpu, gpu and memMB
    """
    return specs.AppDef(
        name=name,
        roles=[
            specs.Role(
                name="binary",
                image=specs.NONE,
                entrypoint=entrypoint,
                num_replicas=num_replicas,
                args=list(args),
                resource=specs.resource(cpu=cpu, gpu=gpu, memMB=memMB, h=h),
            )
        ],
    )


def copy(src: str, dst: str, image: str = DEFAULT_IMAGE, mounts: Optional[List[str]] = None) -> specs.AppDef:
    """Copies one file from src to dst (paths or fsspec URLs such as s3://).

    Directories are not copied. The image needs tx-core installed.

    Args:
        src: the source file (fsspec URL or path)
        dst: the destination file (fsspec URL or path); missing local directories are created
        image: the image to run in (with tx-core installed)
        mounts: mounts into the job (type=bind,src=/host,dst=/job[,readonly])
    """
    return specs.AppDef(
        name="tx-utils-copy",
        roles=[
            specs.Role(
                name="tx-utils-copy",
                image=image,
                entrypoint="python",
                args=["-m", "tx.apps.copy_main", "--src", src, "--dst", dst],
                resource=_small(),
                mounts=specs.parse_mounts(mounts) if mounts else [],
            )
        ],
    )


def booth(
    x1: float,
    x2: float,
    trial_idx: int = 0,
    tracker_base: str = "/tmp/tx-util-booth",
    image: str = DEFAULT_IMAGE,
) -> specs.AppDef:
    """Evaluates the Booth function (a hyperparameter-optimization demo) and records it.

    f(x1, x2) = (x1 + 2*x2 - 7)^2 + (2*x1 + x2 - 5)^2 is written as {"booth_eval": f}
    to TRACKER_BASE/TRIAL_IDX.json. The image needs tx-core installed.

    Args:
        x1: the first coordinate
        x2: the second coordinate
        trial_idx: the trial number (names the result file)
        tracker_base: directory or fsspec URL of the results (e.g. s3://bucket/booth)
        image: the image to run in (with tx-core installed)
    """
    return specs.AppDef(
        name="tx-utils-booth",
        roles=[
            specs.Role(
                name="tx-utils-booth",
                image=image,
                entrypoint="python",
                args=[
                    "-m", "tx.apps.booth_main",
                    "--x1", repr(float(x1)),
                    "--x2", repr(float(x2)),
                    "--trial_idx", str(trial_idx),
                    "--tracker_base", tracker_base,
                ],
                resource=_small(),
            )
        ],
    )
