"""tx.config: settings, in one home.

* :mod:`tx.config.files`: where ``.txconfig`` files are found, how they are read, their
  sections (``[cli:run]``, ``[component:NAME]``, ``[<scheduler>]``, ...);
* :mod:`tx.config.environ`: tx's environment variables and their TorchX aliases, and
  :func:`state_dir`;
* :mod:`tx.config.trackers`: the trackers jobs record to;
* :mod:`tx.config.gc`: how long finished apps are kept;
* :mod:`tx.config.run_options`: a scheduler's section and ``TX_<OPTION>`` variables as typed
  run options, and ``tx configure``'s template (imports the model; not re-exported here);
* :mod:`tx.config.torchx`: ``tx configure --from-torchx``.

This package (without :mod:`~tx.config.run_options`) needs the standard library only, so
the CLI's cold path and a replica's supervisor can read settings cheaply.
"""
from tx.config.environ import CHECKPOINT_DIR, JOB_ID, getenv, state_dir
from tx.config.files import (
    CONFIG_FILE,
    ENV_TXCONFIG,
    ConfigError,
    default_config_dirs,
    find_configs,
    find_files,
    get_config,
    get_configs,
    load_sections,
    scheduler_section,
    search_dirs,
)
from tx.config.gc import GC_KEEP, GC_SECTION, parse_duration
from tx.config.trackers import configured_trackers, tracker_configs

__all__ = [
    "CHECKPOINT_DIR", "CONFIG_FILE", "JOB_ID", "ENV_TXCONFIG", "GC_KEEP", "GC_SECTION", "ConfigError", "configured_trackers",
    "default_config_dirs", "find_configs", "find_files", "get_config", "get_configs", "getenv",
    "load_sections", "parse_duration", "scheduler_section", "search_dirs", "state_dir",
    "tracker_configs",
]
