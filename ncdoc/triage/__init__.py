"""The triage use case: read evidence files, merge them into one picture, run the rules,
pick the verdict."""
