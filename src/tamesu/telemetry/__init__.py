"""Traces: the W3C traceparent tamesu sends the agent, and tamesu's own OpenTelemetry spans."""
