"""SQLAlchemy tables and repositories for the dealer, and its gRPC client of the shuffler."""
