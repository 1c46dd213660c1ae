"""What a test lab files: PAR sheets from the exact odds and a randomness report on the shuffle path.

Kept out of libs/rules on purpose: this package writes files, draws charts and reads the OS CSPRNG.
"""
