"""What a user writes: the schema of suites and project files, loading, and templates."""
