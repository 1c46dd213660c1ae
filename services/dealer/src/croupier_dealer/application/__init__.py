"""The dealer's use cases and the ports they need."""
