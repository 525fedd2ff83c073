"""Distributed PyTorch components: ``dist.ddp`` and ``dist.spmd``.

Both launch the program under ``torchrun`` (torchelastic) on every node: one role with a
replica per node, ``nproc_per_node`` worker processes in each.

* Single node (``-j PROCS`` or ``-j 1xPROCS``): the entrypoint is ``torchrun`` with a plain
  argv and the rendezvous endpoint ``localhost:0`` (a free port), so arguments reach the
  program exactly as given.
* Several nodes: the entrypoint is ``bash -c "torchrun ..."`` because the rendezvous
  endpoint ``${<rank0 env>:=localhost}:PORT`` names an environment variable, set by the
  scheduler on each node (``${rank0_env}`` macro), that the shell expands; every
  user-provided value is ``shlex.quote``-d. With the c10d backend, replica 0 is told to
  host the rendezvous store (``--rdzv_conf is_host=1``, ``is_host=0`` on the others)
  rather than left to torchrun's guess from the host name, which fails where the name
  resolves to loopback and the scheduler hands out the node's network address.

Environment given to the job: ``TX_TRACKING_EXPERIMENT_NAME`` and ``TX_TRACKING_RUN_NAME``
(from ``--name EXP/RUN``; the experiment also as TorchX 0.7.0's ``TORCHX_TRACKING_EXPERIMENT_NAME``,
which TorchX's trackers and users' scripts read), ``LOGLEVEL`` (the submitter's ``LOGLEVEL`` or WARNING) and, with
``--debug``, :data:`TORCH_DEBUG_FLAGS`.
"""
import os
import shlex
from typing import Dict, Iterable, List, Optional, Tuple

import tx.specs as specs
from tx.components import DEFAULT_IMAGE
from tx.components.structured_arg import StructuredJArgument, StructuredNameArgument
from tx.schedulers.ids import unreserved

__all__ = ["ddp", "parse_nnodes", "spmd", "TORCH_DEBUG_FLAGS"]

#: TorchX 0.7.0's name of the experiment variable (TorchX sets no run-name variable)
TORCHX_TRACKING_EXPERIMENT_NAME = "TORCHX_TRACKING_EXPERIMENT_NAME"

#: environment variables ``--debug`` adds: synchronous CUDA launches, NCCL desync
#: detection, detailed torch.distributed checks, C++ stack traces.
TORCH_DEBUG_FLAGS: Dict[str, str] = {
    "CUDA_LAUNCH_BLOCKING": "1",
    "NCCL_DESYNC_DEBUG": "1",
    "TORCH_DISTRIBUTED_DEBUG": "DETAIL",
    "TORCH_SHOW_CPP_STACKTRACES": "1",
}


class _Unquoted(str):
    """A command word the shell must expand (not passed through ``shlex.quote``)."""


def parse_nnodes(j: str) -> Tuple[int, int, int, str]:
    """Split ``-j`` (``PROCS``, ``NODESxPROCS`` or ``MIN:MAXxPROCS``) as TorchX's
    ``dist.parse_nnodes`` does.

    Returns:
        ``(min_nnodes, max_nnodes, nproc_per_node, nnodes_rep)``, ``nnodes_rep`` being
        torchrun's ``--nnodes`` text (``"2"`` or ``"1:4"``).

    Raises:
        ValueError: a malformed ``j``, a zero count, or MIN > MAX.
    """
    parsed = StructuredJArgument.parse(j)
    return parsed.min_nnodes, parsed.nnodes, parsed.nproc_per_node, parsed.nnodes_rep


def _shell_join(words: Iterable[str]) -> str:
    return " ".join(w if isinstance(w, _Unquoted) else shlex.quote(w) for w in words)


def _c10d_conf(rdzv_conf: Optional[str]) -> str:
    """The multi-node ``--rdzv_conf`` word of the c10d backend: the user's configuration
    plus ``is_host=1`` on replica 0 and ``is_host=0`` elsewhere (a shell arithmetic
    expansion of the ``${replica_id}`` macro), unless the user set ``is_host`` already.

    Without ``is_host`` torchrun guesses whether this node hosts the rendezvous store by
    matching the endpoint against the machine's host name and the addresses that name
    resolves to; where the name resolves to loopback (Debian's ``/etc/hosts`` maps it to
    127.0.1.1) and the scheduler hands out the node's network address (Ray, Slurm's
    ``NodeAddr``), no node matches, none hosts the store and all time out.
    """
    keys = {kv.split("=", 1)[0].strip() for kv in (rdzv_conf or "").split(",") if kv.strip()}
    if "is_host" in keys:
        return rdzv_conf  # type: ignore[return-value]
    # "$$" escapes the macro syntax: after substitution bash sees $((1==0)) on replica 1
    is_host = f"is_host=$$(({specs.macros.replica_id}==0))"
    return _Unquoted(f"{shlex.quote(rdzv_conf + ',')}{is_host}" if rdzv_conf else is_host)


def spmd(
    *args: str,
    script: Optional[str] = None,
    m: Optional[str] = None,
    image: str = DEFAULT_IMAGE,
    name: str = "/",
    h: str = "gpu.small",
    j: str = "1x1",
    env: Optional[Dict[str, str]] = None,
    metadata: Optional[Dict[str, str]] = None,
    max_retries: int = 0,
    mounts: Optional[List[str]] = None,
    debug: bool = False,
) -> specs.AppDef:
    """Single-program-multiple-data app on hosts of a named resource, one process per GPU.

    ``-j NODES`` runs NODES hosts of the named resource ``h`` with one process per GPU
    (``-j 2 -h gpu.xlarge`` = 2 nodes x 8 processes); ``-j NODESxPROCS`` sets the process
    count explicitly (a warning tells when it differs from the host's GPUs). Use it for any torch.distributed program (DDP, FSDP, RPC); ``-j 1x1`` runs a single
    process that may still call ``init_process_group``. Multi-node runs need the hosts to
    reach each other on port 29500.

    Args:
        args: arguments to the script or module
        script: the script to run (path relative to the image's working directory)
        m: the module to run (python -m MODULE), instead of a script
        image: the image to run in: container schedulers pull it; local_cwd ignores it and runs in
            the current directory
        name: EXPERIMENT/RUN, EXPERIMENT/, /RUN or RUN; the run name defaults to the script or module name
        h: the named resource of each node (e.g. gpu.small, gpu.xlarge)
        j: NODES (processes per node = GPUs of h), NODESxPROCS or MIN:MAXxPROCS
        env: environment variables for the job (KEY=VALUE,KEY2=VALUE2)
        metadata: scheduler metadata (KEY=VALUE,KEY2=VALUE2)
        max_retries: how many times the scheduler may restart the job
        mounts: mounts into the job (type=bind,src=/host,dst=/job[,readonly] or type=volume,src=NAME,dst=/job)
        debug: run with TORCH_DEBUG_FLAGS set (blocking CUDA launches, detailed distributed checks)
    """
    return ddp(
        *args,
        script=script,
        m=m,
        image=image,
        name=name,
        h=h,
        j=str(StructuredJArgument.parse_from(h, j)),
        env=env,
        metadata=metadata,
        max_retries=max_retries,
        mounts=mounts,
        debug=debug,
    )


def ddp(
    *script_args: str,
    script: Optional[str] = None,
    m: Optional[str] = None,
    image: str = DEFAULT_IMAGE,
    name: str = "/",
    h: Optional[str] = None,
    cpu: int = 2,
    gpu: int = 0,
    memMB: int = 1024,
    j: str = "1x2",
    env: Optional[Dict[str, str]] = None,
    metadata: Optional[Dict[str, str]] = None,
    max_retries: int = 0,
    rdzv_port: int = 29500,
    rdzv_backend: str = "c10d",
    rdzv_conf: Optional[str] = None,
    mounts: Optional[List[str]] = None,
    debug: bool = False,
    tee: int = 3,
) -> specs.AppDef:
    """Distributed data parallel app: torchrun on each node, with PROCS workers per node.

    One role, one replica per node (``-j NODESxPROCS``). Single-node jobs rendezvous on localhost with a free port (rdzv_port is ignored);
    multi-node jobs rendezvous with c10d on the rank-0 node at rdzv_port. The resource
    is h if given (a named resource), else cpu/gpu/memMB.

    Args:
        script_args: arguments to the script or module (put them after --)
        script: the script to run (path relative to the image's working directory)
        m: the module to run (python -m MODULE), instead of a script
        image: the image to run in: container schedulers pull it; local_cwd ignores it and runs in
            the current directory
        name: EXPERIMENT/RUN, EXPERIMENT/, /RUN or RUN; the run name defaults to the script or module name
        h: a named resource (e.g. gpu.small); takes precedence over cpu, gpu and memMB
        cpu: CPUs per node
        gpu: GPUs per node
        memMB: memory per node in MB
        j: NODESxPROCS (2x4), MIN:MAXxPROCS for an elastic node count (1:4x8), or PROCS for one node (8)
        env: environment variables for the job (KEY=VALUE,KEY2=VALUE2)
        metadata: scheduler metadata (KEY=VALUE,KEY2=VALUE2)
        max_retries: how many times the scheduler may restart the job
        rdzv_port: port of the c10d rendezvous store on the rank-0 node (multi-node only)
        rdzv_backend: torchelastic rendezvous backend (c10d, static, etcd, ...)
        rdzv_conf: extra rendezvous configuration (e.g. join_timeout=600,close_timeout=600); multi-node c10d adds is_host (1 on replica 0) unless given
        mounts: mounts into the job (type=bind,src=/host,dst=/job[,readonly] or type=volume,src=NAME,dst=/job)
        debug: run with TORCH_DEBUG_FLAGS set (blocking CUDA launches, detailed distributed checks)
        tee: streams torchrun tees to console and file: 0 none, 1 stdout, 2 stderr, 3 both
    """
    if (script is None) == (m is None):
        raise ValueError("exactly one of --script and -m must be specified")
    jarg = StructuredJArgument.parse(j)
    argname = StructuredNameArgument.parse_from(name=name, m=m, script=script)
    multi_node = jarg.nnodes > 1

    env = dict(env or {})
    env["TX_TRACKING_EXPERIMENT_NAME"] = argname.experiment_name
    env["TX_TRACKING_RUN_NAME"] = argname.run_name
    env[TORCHX_TRACKING_EXPERIMENT_NAME] = argname.experiment_name
    env.setdefault("LOGLEVEL", os.getenv("LOGLEVEL", "WARNING"))
    if debug:
        env.update(TORCH_DEBUG_FLAGS)

    conf: Optional[str] = rdzv_conf
    if multi_node:
        # "$$" escapes the macro syntax: after substitution bash sees ${TX_RANK0_HOST:=localhost}
        endpoint: str = _Unquoted(f"$${{{specs.macros.rank0_env}:=localhost}}:{rdzv_port}")
        if rdzv_backend == "c10d":
            conf = _c10d_conf(rdzv_conf)
    else:
        endpoint = "localhost:0"
    torchrun_args = [
        "--rdzv_backend", rdzv_backend,
        *(["--rdzv_conf", conf] if conf is not None else []),
        "--rdzv_endpoint", endpoint,
        "--rdzv_id", specs.macros.app_id,
        "--nnodes", jarg.nnodes_rep,
        "--nproc_per_node", str(jarg.nproc_per_node),
        "--tee", str(tee),
        "--role", "",
    ]
    if rdzv_backend == "static":
        torchrun_args += ["--node_rank", specs.macros.replica_id]
    torchrun_args += [script] if script is not None else ["-m", m]  # type: ignore[list-item]
    torchrun_args += list(script_args)

    if multi_node:
        entrypoint, args = "bash", ["-c", _shell_join(["torchrun", *torchrun_args])]
    else:
        entrypoint, args = "torchrun", torchrun_args
    role_name = StructuredNameArgument.parse_from(name="/", m=m, script=script).run_name
    # a run name tx derived from the program (``--script run.py``) is kept out of the names
    # tx keeps for run and sweep handles; one the user gave is checked when the app is run
    derived = not (name.partition("/")[2] if "/" in name else name)
    return specs.AppDef(
        name=unreserved(argname.run_name) if derived else argname.run_name,
        roles=[
            specs.Role(
                name=role_name,
                image=image,
                min_replicas=jarg.min_nnodes,
                entrypoint=entrypoint,
                num_replicas=jarg.nnodes,
                resource=specs.resource(cpu=cpu, gpu=gpu, memMB=memMB, h=h),
                args=args,
                env=env,
                port_map={"c10d": rdzv_port},
                max_retries=max_retries,
                mounts=specs.parse_mounts(mounts) if mounts else [],
            )
        ],
        metadata=dict(metadata or {}),
    )
