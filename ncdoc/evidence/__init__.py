"""Evidence parsers: facts from what a job left behind (NCCL logs, nccl-tests output, launch files).

Pure parsing: each parser returns frozen facts with the lines they came from, and the rules
decide what they mean. The log parser streams, so any log size is safe.

    parse_nccl_log(lines, source) / parse_nccl_log_file(path)        -> LogFacts
    parse_nccl_tests(lines, source) / parse_nccl_tests_json(data) /
    parse_nccl_tests_file(path)                                       -> NcclTestsFacts
    parse_launch_env(text, source) / parse_launch_env_file(path)      -> LaunchEnv
"""

from ncdoc.evidence.citation import Citation
from ncdoc.evidence.launch_env import LaunchEnv, parse_launch_env, parse_launch_env_file
from ncdoc.evidence.nccl_log import LogFacts, parse_nccl_log, parse_nccl_log_file
from ncdoc.evidence.nccl_tests import NcclTestsFacts, parse_nccl_tests, parse_nccl_tests_file, parse_nccl_tests_json

__all__ = ["Citation", "LaunchEnv", "LogFacts", "NcclTestsFacts", "parse_launch_env", "parse_launch_env_file",
           "parse_nccl_log", "parse_nccl_log_file", "parse_nccl_tests", "parse_nccl_tests_file",
           "parse_nccl_tests_json"]
