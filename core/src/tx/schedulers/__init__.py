"""tx.schedulers: the Scheduler base class, its responses and the scheduler registry."""
from tx.schedulers.api import (
    DescribeAppResponse,
    ListAppResponse,
    Scheduler,
    SchedulerError,
    get_default_scheduler_name,
    get_scheduler_factories,
)
from tx.schedulers.streams import Stream, filter_regex, split_lines, split_lines_iterator

__all__ = [
    "DescribeAppResponse", "ListAppResponse", "Scheduler", "SchedulerError", "Stream", "filter_regex",
    "get_default_scheduler_name", "get_scheduler_factories", "split_lines", "split_lines_iterator",
]
