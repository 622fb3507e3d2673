"""A small orchestrator agent for tamesu's remote-agents example."""
