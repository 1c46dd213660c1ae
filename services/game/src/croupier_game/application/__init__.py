"""Use cases of the game service, over ports (store, shuffler, dealer, stakes)."""
