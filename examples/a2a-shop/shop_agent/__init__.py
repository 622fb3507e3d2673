"""The A2A shop agent in small parts: rules (logic), A2A events (executor), cards, auth, push, servers."""
