"""What a run records on disk: result and transcript shapes (records), run folders (rundir) and the
provenance of a run (which code it tested)."""
