"""NCCL env files: layering values the way NCCL does, generating a starting env from the
topology, and rendering it in each file format."""
