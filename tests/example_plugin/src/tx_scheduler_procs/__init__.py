"""tx-scheduler-procs: the example scheduler plugin of docs/hooks.md."""
