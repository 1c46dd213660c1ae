"""The five games, each a ``Game`` plugged into the common ``Decider``."""
