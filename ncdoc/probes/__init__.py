"""Probes: the only code that reads the machine (sysfs, /proc, NVML, verbs, `ip`).

`capture()` (in ncdoc.probes.live) runs them all and returns a Snapshot; each module fills
one section. Heavy libraries (pynvml, pyverbs) are imported inside the functions that use them.
"""
