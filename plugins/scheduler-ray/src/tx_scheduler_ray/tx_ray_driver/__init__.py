"""tx's Ray job driver: what the Ray job of a tx app runs (``python -m tx_ray_driver``).

This package is uploaded with every job as a runtime-env ``py_modules`` entry, so it must
import nothing but the standard library and ``ray`` (tx is not installed on the cluster).

What it does, in order:

1. reads the job spec (JSON, environment variable :data:`SPEC_ENV`, built by
   :mod:`tx_scheduler_ray.request`);
2. reserves one placement group holding a bundle for each required replica of every role
   (``min_replicas`` of elastic roles, else ``num_replicas``), and one single-bundle
   placement group for each further replica of an elastic role, created once the required
   ones are placed (https://docs.ray.io/en/latest/ray-core/scheduling/placement-group.html);
3. starts one :class:`Replica` actor per replica in its bundle; each runs the role's
   command as a child process with the replica's environment, ``TX_RANK0_HOST`` (and its
   TorchX name), ``MASTER_ADDR`` and ``MASTER_PORT``, ``PET_LOCAL_ADDR`` (torchrun's
   ``--local_addr``) = its node's address, and writes the child's stdout, stderr
   and a line-merged ``combined`` stream to files under the node's Ray log directory
   (``<logs>/tx/<submission_id>/<role>-<replica>.<stream>``), which the Ray dashboard serves;
4. restarts failed replicas per the role's ``max_retries`` and ``retry_policy``; on a failure
   that ends the app it stops the other replicas, after waiting (up to the spec's
   ``one_failure_s``) for them to end on their own where the failed one only lost its peer
   (:mod:`tx_scheduler_ray.tx_ray_driver._peers`);
5. keeps ``<logs>/tx/<submission_id>/state.json`` on its own node up to date: the app's state,
   why it waits, its first failure (and the replicas that failed beside it), and each
   replica's state, host, exit code and log sizes.

On SIGTERM (``ray job stop``) it stops every replica (SIGTERM to the replica's process group,
SIGKILL after a grace period), removes its placement groups and records CANCELLED.
"""

#: the environment variable that carries the job spec (JSON) to the driver
SPEC_ENV = "TX_RAY_DRIVER_SPEC"
#: version of the spec and of ``state.json``
FORMAT_VERSION = 1
#: the app's directory, relative to the Ray log directory of each node
STATE_DIR = "tx/{submission_id}"
#: the state file in :data:`STATE_DIR`, on the driver's node
STATE_FILE = "state.json"
#: the streams each replica writes
STREAMS = ("stdout", "stderr", "combined")


def state_dir(submission_id: str) -> str:
    """``tx/<submission_id>``: where an app's files live under each node's Ray log directory."""
    return STATE_DIR.format(submission_id=submission_id)


def log_name(submission_id: str, role: str, replica_id: int, stream: str) -> str:
    """``tx/<submission_id>/<role>-<replica_id>.<stream>``, relative to the Ray log
    directory of the node the replica ran on (appended across restarts)."""
    return f"{state_dir(submission_id)}/{role}-{replica_id}.{stream}"
