"""ncdoc: an NCCL environment doctor and auto-tuner."""

__version__ = "0.1.0"
