"""Pure dealing logic: the cut, the cursor, and retries; no I/O."""
