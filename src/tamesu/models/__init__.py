"""Model access behind one small interface: one module per provider, the replay cache, usage and budgets."""
