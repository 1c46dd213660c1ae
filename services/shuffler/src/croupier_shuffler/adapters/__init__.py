"""SQLAlchemy tables and repositories for the shuffler."""
