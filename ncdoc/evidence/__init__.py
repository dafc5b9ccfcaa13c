"""Evidence parsers: facts from what a job left behind (NCCL logs, nccl-tests output, launch files).

Pure parsing: each parser returns frozen facts with the lines they came from, and the rules
decide what they mean. The log parser streams, so any log size is safe.

    parse_nccl_log(lines, source) / parse_nccl_log_file(path)        -> LogFacts
    parse_nccl_tests(lines, source) / parse_nccl_tests_json(data) /
    parse_nccl_tests_file(path)                                       -> NcclTestsFacts
    parse_launch_env(text, source) / parse_launch_env_file(path)      -> LaunchEnv

The names are imported when first asked for: importing one parser's module (the package comes first)
costs no other parser's patterns and records.
"""

_WHERE = {
    "Citation": "ncdoc.evidence.citation",
    "LaunchEnv": "ncdoc.evidence.launch_env", "parse_launch_env": "ncdoc.evidence.launch_env",
    "parse_launch_env_file": "ncdoc.evidence.launch_env",
    "LogFacts": "ncdoc.evidence.nccl_log", "parse_nccl_log": "ncdoc.evidence.nccl_log",
    "parse_nccl_log_file": "ncdoc.evidence.nccl_log",
    "NcclTestsFacts": "ncdoc.evidence.nccl_tests", "parse_nccl_tests": "ncdoc.evidence.nccl_tests",
    "parse_nccl_tests_file": "ncdoc.evidence.nccl_tests", "parse_nccl_tests_json": "ncdoc.evidence.nccl_tests",
}


def __getattr__(name: str):
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module 'ncdoc.evidence' has no attribute {name!r}")
    import importlib
    value = getattr(importlib.import_module(where), name)
    globals()[name] = value
    return value


__all__ = ["Citation", "LaunchEnv", "LogFacts", "NcclTestsFacts", "parse_launch_env", "parse_launch_env_file",
           "parse_nccl_log", "parse_nccl_log_file", "parse_nccl_tests", "parse_nccl_tests_file",
           "parse_nccl_tests_json"]
