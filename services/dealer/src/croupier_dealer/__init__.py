"""The dealer: deals a round's cards from its committed, cut shoe, in order, never a card twice.

Entry point: `croupier_dealer.bootstrap.bootstrap(ctx)`.
"""
