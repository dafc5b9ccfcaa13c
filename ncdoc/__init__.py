"""ncdoc: an NCCL environment doctor and auto-tuner."""

__version__ = "0.1.0"

# ncdoc's own modules are found and read by a leaner path than importlib's general one: `ncdoc check`
# imports some forty of them in every job script (see ncdoc.startup.fast_import).
from ncdoc.startup.fast_import import install as _install

_install()
del _install
