"""Transport: the gRPC servicer and the bus consumer, both thin."""
