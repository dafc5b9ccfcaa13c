"""The tuner: search spaces, studies, trial dispatch and benchmark backends."""
