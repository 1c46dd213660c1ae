"""Storage (SQLAlchemy Core, in-memory) and gRPC clients of the other services."""
