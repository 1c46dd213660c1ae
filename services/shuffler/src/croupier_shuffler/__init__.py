"""The shuffler: shoes from the OS CSPRNG, committed before the round and revealed after it.

Entry point: `croupier_shuffler.bootstrap.bootstrap(ctx)`.
"""
