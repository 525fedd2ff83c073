"""The public names TorchX 0.7.0 code imports, at TorchX's module paths (the list is
TorchX 0.7.0's public API surface, and the private names of the local scheduler and the
CLI that projects subclassing TorchX's schedulers import; TorchX's CLI command classes, which
it documents for ``torchx.cli.cmds`` plugins; the test helpers TorchX ships in its
package)."""
import importlib

import pytest

NAMES = {
    "torchx": ["IMAGE", "__version__"],
    "torchx.version": ["TORCHX_IMAGE", "__version__", "load"],
    "torchx.specs": [
        "ALL", "MISSING", "NONE", "NULL_RESOURCE", "AppDef", "AppDryRunInfo", "AppHandle", "AppState",
        "AppStatus", "BindMount", "CfgVal", "DeviceMount", "GENERIC_NAMED_RESOURCES", "GiB",
        "InvalidRunConfigException", "MalformedAppHandleException", "ReplicaState", "ReplicaStatus",
        "Resource", "RetryPolicy", "Role", "RoleStatus", "UnknownAppException", "UnknownSchedulerException",
        "VolumeMount", "get_named_resources", "get_type_name", "is_terminal", "load_group", "macros",
        "make_app_handle", "materialize_appdef", "named_resources", "parse_app_handle", "parse_mounts",
        "resource", "runopt", "runopts",
    ],
    "torchx.specs.api": [
        "AppDef", "AppDryRunInfo", "AppHandle", "AppState", "AppStatus", "AppStatusError", "CfgVal",
        "MountType", "ParsedAppHandle", "Role", "RoleStatus", "ReplicaStatus", "is_started", "is_terminal",
        "macros", "parse_app_handle", "runopt", "runopts", "to_dict",
    ],
    "torchx.specs.builders": ["materialize_appdef", "make_app_handle", "parse_mounts", "decode", "is_bool"],
    "torchx.specs.finder": [
        "ComponentNotFoundException", "ComponentValidationException", "get_builtin_source", "get_component",
        "get_components",
    ],
    "torchx.specs.file_linter": ["LinterMessage", "TorchXArgumentHelpFormatter", "get_fn_docstring", "validate"],
    "torchx.specs.named_resources_generic": ["NAMED_RESOURCES", "GiB", "Resource"],
    "torchx.runner": ["Runner", "get_runner"],
    "torchx.runner.api": [
        "ENV_TORCHX_JOB_ID", "ENV_TORCHX_PARENT_RUN_ID", "ENV_TORCHX_TRACKERS", "Runner", "SchedulerFactory",
        "WorkspaceMixin", "get_configured_trackers", "get_runner", "get_scheduler_factories", "log_event",
        "tracker_config_env_var_name",
    ],
    "torchx.runner.config": [
        "CONFIG_FILE", "CONFIG_PREFIX_DELIM", "DEFAULT_CONFIG_DIRS", "apply", "dump", "find_configs",
        "get_config", "get_configs", "load", "load_sections",
    ],
    "torchx.runner.events": ["SourceType", "TorchxEvent", "log_event", "record"],
    "torchx.schedulers": ["Scheduler", "SchedulerFactory", "get_default_scheduler_name",
                          "get_scheduler_factories", "load_group"],
    "torchx.schedulers.api": [
        "DAYS_IN_2_WEEKS", "DescribeAppResponse", "ListAppResponse", "Scheduler", "Stream", "WorkspaceMixin",
        "filter_regex", "split_lines", "split_lines_iterator",
    ],
    "torchx.schedulers.ids": ["get_len_random_id", "make_unique", "random_id", "random_uint64"],
    "torchx.schedulers.local_scheduler": [
        "CWDImageProvider", "LocalDirectoryImageProvider", "LocalScheduler", "create_scheduler", "LocalOpts",
        "ImageProvider", "PopenRequest", "ReplicaParam", "_LocalAppDef", "_LocalReplica", "LogIterator",
        "STDOUT_LOG", "STDERR_LOG", "COMBINED_LOG", "AppId", "_join_PATH",
    ],
    "torchx.schedulers.slurm_scheduler": ["SLURM_STATES", "SlurmScheduler", "create_scheduler"],
    "torchx.schedulers.docker_scheduler": ["_to_str", "DockerScheduler", "DockerOpts", "create_scheduler",
                                           "has_docker"],
    "torchx.schedulers.streams": ["Tee"],
    "torchx.schedulers.ray_scheduler": ["RayScheduler", "create_scheduler"],
    "torchx.runtime.tracking": ["FsspecResultTracker", "ResultTracker"],
    "torchx.cli.cmd_log": ["CmdLog", "ID_FORMAT", "_prefix_line", "find_role_replicas", "get_logs",
                           "print_log_lines", "validate"],
    "torchx.cli.argparse_util": ["ArgOnceAction", "torchxconfig", "torchxconfig_run"],
    "torchx.schedulers.devices": ["DEVICES", "get_device_mounts", "to_devicemounts"],
    "torchx.schedulers.kubernetes_scheduler": ["KubernetesOpts", "LABEL_INSTANCE_TYPE", "app_to_resource"],
    "torchx.schedulers.kubernetes_mcad_scheduler": ["KubernetesMCADOpts", "LABEL_INSTANCE_TYPE", "app_to_resource"],
    "torchx.schedulers.gcp_batch_scheduler": ["GCPBatchOpts", "LABEL_APP_NAME", "LABEL_VERSION", "LOCATIONS"],
    "torchx.tracker.backend.fsspec": ["FsspecTracker", "create", "generate_filename"],
    "torchx.tracker.mlflow": ["MLflowTracker", "create_tracker"],
    "torchx.workspace.docker_workspace": ["DockerWorkspaceMixin", "print_push_events"],
    "torchx.cli.colors": ["BLUE", "ENDC", "GRAY", "GREEN", "ORANGE"],
    "torchx.components.dist": ["ddp", "spmd", "parse_nnodes", "macros", "_TORCH_DEBUG_FLAGS"],
    "torchx.components.utils": ["binary", "booth", "copy", "echo", "python", "sh", "touch"],
    "torchx.components.serve": ["torchserve"],
    "torchx.components.metrics": ["tensorboard"],
    "torchx.components.structured_arg": ["StructuredJArgument", "StructuredNameArgument"],
    "torchx.tracker": ["AppRun", "app_run_from_env"],
    "torchx.tracker.api": ["AppRun", "TrackerBase", "TrackerArtifact", "TrackerSource", "build_trackers",
                           "trackers_from_environ", "ENV_TORCHX_JOB_ID"],
    "torchx.workspace": ["WorkspaceMixin", "walk_workspace"],
    "torchx.workspace.api": ["WorkspaceMixin", "walk_workspace", "TORCHX_IGNORE"],
    "torchx.workspace.dir_workspace": ["DirWorkspaceMixin", "TmpDirWorkspaceMixin"],
    "torchx.cli.main": ["main", "console", "get_sub_cmds", "get_default_sub_cmds", "load_group"],
    "torchx.cli.cmd_base": ["SubCommand"],
    "torchx.cli.cmd_run": ["CmdRun", "CmdBuiltins"],
    "torchx.cli.cmd_status": ["CmdStatus"],
    "torchx.cli.cmd_cancel": ["CmdCancel"],
    "torchx.cli.cmd_describe": ["CmdDescribe"],
    "torchx.cli.cmd_list": ["CmdList"],
    "torchx.cli.cmd_runopts": ["CmdRunopts"],
    "torchx.cli.cmd_configure": ["CmdConfigure"],
    "torchx.cli.cmd_tracker": ["CmdTracker"],
    "torchx.apps.serve.serve": ["main", "parse_args", "get_routable_ip_to", "rand_id", "TORCHSERVE_PARAMS"],
    "torchx.apps.utils.booth_main": ["main"],
    "torchx.apps.utils.copy_main": ["main"],
    "torchx.apps.utils.process_monitor": ["main", "TIMEOUT_EXIT_CODE"],
    "torchx.components.component_test_base": ["ComponentTestCase"],
    "torchx.test.fixtures": ["IS_CI", "IS_MACOS", "DistributedTestCase", "TestWithTmpDir"],
    "torchx.util.modules": ["load_module"],
    "torchx.util.cuda": ["has_cuda_devices"],
    "torchx.util.strings": ["normalize_str"],
    "torchx.util.shlex": ["join"],
    "torchx.distributed": ["init_pg", "local_rank", "local_device", "on_rank0_first", "rank", "world_size",
                           "is_rank0", "is_local_rank0", "on_local_rank0_first", "local_cuda_device"],
    "torchx.util.types": ["decode", "decode_optional", "is_bool", "none_throws", "to_dict", "to_list"],
    "torchx.util.entrypoints": ["load", "load_group"],
}


@pytest.mark.parametrize("module", sorted(NAMES))
def test_public_names(module: str) -> None:
    mod = importlib.import_module(module)
    missing = [n for n in NAMES[module] if not hasattr(mod, n)]
    assert not missing, f"{module} lacks {missing}"
