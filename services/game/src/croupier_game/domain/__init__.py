"""Rounds, tables and what a caller may see: no I/O here."""
