"""Formatting shared by the CLI commands: the tables and colored state names of :mod:`tx.views`
(what the CLI and ``tx ui`` both show) and the durations and ages of :mod:`tx.durations`."""
from __future__ import annotations


from tx.durations import format_age, format_duration  # re-exported: the commands import them from here
from tx.views import STATE_COLORS, color_state, table  # re-exported: what the CLI and tx ui both show

__all__ = ["STATE_COLORS", "color_state", "format_age", "format_duration", "table"]
