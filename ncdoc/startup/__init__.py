"""Start-up machinery. `ncdoc check` runs in every job script and must start in about twice
the time of an empty Python, so the model's records, JSON reading and typed loading are
built here without dataclasses, typing, json.decoder or re, and ncdoc's own modules are
imported by a lean finder (fast_import). Nothing else belongs here."""
