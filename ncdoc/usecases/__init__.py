"""Use cases the CLI calls: each takes plain values (paths, NAME=VALUE strings, names), does the
work across the rooms, and returns what a formatter renders. The CLI only parses arguments and
maps results to exit codes; triage has its own room (ncdoc/triage/)."""
