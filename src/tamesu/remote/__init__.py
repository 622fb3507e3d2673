"""`remote_agents:`: scripted A2A agents that tamesu serves for each run, for the agent under test to delegate to.

- `spec`: the keys a user writes (imported by the suite schema, so it stays free of a2a-sdk imports).
- `group.RemoteAgents`: one run's agents, started before the target opens and stopped after the run.
- `server`, `card`, `executor`, `gate`, `_binding`: one agent on a2a-sdk's server side.
- `push`: push notifications in the shape of the version the caller spoke.
- `forward`, `_wire`: `forward:`, the recording proxy in front of a real agent (HTTP only, both versions).
"""
