"""Pure shoe logic: no I/O, no clock, no hidden randomness (the RNG is passed in)."""
