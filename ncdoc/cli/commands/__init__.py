"""One module per subcommand, and the list of them.

Each module in ncdoc.cli.commands defines NAME, HELP, add_arguments(parser) and run(args) -> int.
The parser imports every module listed here, so they keep heavy imports (ray, optuna, pynvml)
inside run().
"""

COMMAND_MODULES = (
    "snapshot", "topo", "check", "lint", "doctor", "triage", "env",
    "rules", "rule", "tune", "report", "cluster", "demo",
)

# Commands whose simple command lines skip argparse (see ncdoc.cli.fast_args) and the interpreter's teardown
# (ncdoc.cli.main._exit_now); NO_GC_COMMANDS also run without the cyclic garbage collector: short-lived, and
# with little to collect (a triage of a big log runs long enough to need it).
FAST_COMMANDS = ("check", "triage")
NO_GC_COMMANDS = ("check",)
