"""Transport: the gRPC servicer (the dealer consumes no events)."""
