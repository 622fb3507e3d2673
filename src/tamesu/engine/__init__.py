"""The conversation loop, runs and repeats, scheduling, hooks and artifacts."""
