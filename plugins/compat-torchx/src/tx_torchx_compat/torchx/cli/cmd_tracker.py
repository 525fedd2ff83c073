"""``torchx.cli.cmd_tracker``: TorchX 0.7.0's ``CmdTracker`` (its parser, its ``tracker``
property and its ``*_command`` methods) on tx's trackers. The ``torchx tracker`` command
itself is tx's ``tracker`` (``tx tracker --help``: ``--json``, ``--tracker``, lineage)."""
import argparse
from typing import Any

from tx.tracker.api import TrackerBase, build_trackers, get_configured_trackers
from tx.views import table
from tx_torchx_compat.torchx.cli.cmd_base import SubCommand, TxSubCommand  # noqa: F401 - TorchX imports it from here

__all__ = ["CmdTracker"]


class CmdTracker(SubCommand):
    """TorchX's tracker subcommand: ``list jobs [--parent-run-id ID]``, ``list metadata
    RUN_ID``, ``list artifacts [--artifact NAME] RUN_ID`` (``list lineage`` is not
    implemented, as in TorchX); :meth:`add_arguments` sets each one's ``func``."""

    @property
    def tracker(self) -> TrackerBase:
        """The first configured tracker (``build_trackers(get_configured_trackers())``).

        Raises:
            RuntimeError: no tracker is configured (TorchX's error).
        """
        trackers = list(build_trackers(get_configured_trackers()))
        if not trackers:
            raise RuntimeError("No trackers configured. See: https://pytorch.org/torchx/latest/runtime/tracking.html")
        return trackers[0]

    def add_list_job_arguments(self, subparser: argparse.ArgumentParser) -> None:
        """``--parent-run-id``."""
        subparser.add_argument("--parent-run-id", type=str, help="Optional job parent run ID")

    def list_jobs_command(self, args: argparse.Namespace) -> None:
        """Print the tracker's run ids (children of ``args.parent_run_id`` if set)."""
        ids = self.tracker.run_ids(parent_run_id=args.parent_run_id)
        print(table(["JOB ID"], [[i] for i in ids]))

    def add_job_lineage_arguments(self, subparser: argparse.ArgumentParser) -> None:
        """``--sources-only | --descendants-only``, ``--artifact``, ``RUN_ID``."""
        group = subparser.add_mutually_exclusive_group()
        group.add_argument("--sources-only", action="store_true", help="Limit to sources")
        group.add_argument("--descendants-only", action="store_true", help="Limit to descendants")
        subparser.add_argument("--artifact", type=str, help="Limit to specific artifact")
        subparser.add_argument("RUN_ID", type=str, help="Job run ID")

    def job_lineage_command(self, args: argparse.Namespace) -> None:
        """Not implemented (as in TorchX 0.7.0; ``tx tracker lineage RUN_ID`` is).

        Raises:
            NotImplementedError: always.
        """
        raise NotImplementedError("use `tx tracker lineage RUN_ID`")

    def add_metadata_arguments(self, subparser: argparse.ArgumentParser) -> None:
        """``RUN_ID``."""
        subparser.add_argument("RUN_ID", type=str, help="Job run ID")

    def list_metadata_command(self, args: argparse.Namespace) -> None:
        """Print run ``args.RUN_ID``'s metadata."""
        metadata = self.tracker.metadata(args.RUN_ID)
        print(table(["ID", "VALUE"], [[k, str(v)] for k, v in metadata.items()]))

    def add_artifacts_arguments(self, subparser: argparse.ArgumentParser) -> None:
        """``--artifact``, ``RUN_ID``."""
        subparser.add_argument("--artifact", type=str, help="Limit to specific artifact")
        subparser.add_argument("RUN_ID", type=str, help="Job run ID")

    def list_artifacts_command(self, args: argparse.Namespace) -> None:
        """Print run ``args.RUN_ID``'s artifacts (only ``args.artifact`` if set)."""
        artifacts = list(self.tracker.artifacts(args.RUN_ID).values())
        if args.artifact:
            artifacts = [a for a in artifacts if a.name == args.artifact]
        print(table(["ARTIFACT", "PATH", "METADATA"], [[a.name, a.path, str(a.metadata)] for a in artifacts]))

    def add_arguments(self, subparser: argparse.ArgumentParser) -> None:
        """TorchX's ``list {jobs,metadata,artifacts,lineage}`` parsers, each with ``func``."""
        subs = subparser.add_subparsers(description="Experimental tracker subcommands to query available tracked data.")
        lst = subs.add_parser("list", help="Use `list --help` to get supported args")
        what = lst.add_subparsers(description="Tracker list subcommands")
        for name, func, add in (("jobs", self.list_jobs_command, self.add_list_job_arguments),
                                ("metadata", self.list_metadata_command, self.add_metadata_arguments),
                                ("artifacts", self.list_artifacts_command, self.add_artifacts_arguments),
                                ("lineage", self.job_lineage_command, self.add_job_lineage_arguments)):
            p = what.add_parser(name)
            p.set_defaults(func=func)
            add(p)

    def run(self, args: Any) -> None:
        """Run the subcommand :meth:`add_arguments` chose (``args.func``), if any."""
        func = getattr(args, "func", None)
        if callable(func) and getattr(func, "__func__", None) is not CmdTracker.run:
            func(args)
