"""Example machines: YAML specs built into real-format sysfs trees, with NVML and verbs
answers replayed at the import boundary (the bundled `--example` nodes and test fixtures)."""
