"""``torchx.tracker.api``: :mod:`tx.tracker.api`, with TorchX's ``ENV_TORCHX_*`` names and
``tracker_config_env_var_name`` (TorchX's variable names; tx reads them where its own
``TX_*`` names are unset, :func:`tx.config.environ.getenv`)."""
from tx.config.environ import JOB_ID, PARENT_RUN_ID, TORCHX_NAMES, TRACKERS, torchx_name, tracker_config_var
from tx.tracker.api import *  # noqa: F401,F403

ENV_TORCHX_JOB_ID = TORCHX_NAMES[JOB_ID]
ENV_TORCHX_PARENT_RUN_ID = TORCHX_NAMES[PARENT_RUN_ID]
ENV_TORCHX_TRACKERS = TORCHX_NAMES[TRACKERS]


def tracker_config_env_var_name(entrypoint_key: str) -> str:
    """TorchX's ``TORCHX_TRACKER_<NAME>_CONFIG``: the variable with tracker
    ``entrypoint_key``'s config (tx's own name is ``TX_TRACKER_<NAME>_CONFIG``)."""
    return str(torchx_name(tracker_config_var(entrypoint_key)))
