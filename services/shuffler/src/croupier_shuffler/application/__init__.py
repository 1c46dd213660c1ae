"""The shuffler's use cases and the ports they need."""
