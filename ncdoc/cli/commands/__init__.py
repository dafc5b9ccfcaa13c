"""One module per subcommand, and the list of them.

Each module in ncdoc.cli.commands defines NAME, HELP, add_arguments(parser) and run(args) -> int.
The parser imports every module listed here, so they keep heavy imports (ray, optuna, pynvml)
inside run().
"""

COMMAND_MODULES = (
    "snapshot", "topo", "check", "lint", "doctor", "triage", "env",
    "rules", "rule", "tune", "report", "cluster", "demo",
)

# Commands whose simple command lines skip argparse (see ncdoc.cli.fast_args).
FAST_COMMANDS = ("check",)
