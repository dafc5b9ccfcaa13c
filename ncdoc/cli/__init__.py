"""Command-line interface: argument parsing and exit codes only; each command calls one use case."""
