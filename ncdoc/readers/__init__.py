"""Readers of structured files people write (rule packs, policies, configs, tuner data):
parsed with line numbers so every error names the file, the line and the key."""
