"""Exact odds by combinatorics, computed through the same deciders that run the tables."""
