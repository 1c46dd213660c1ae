"""Transport: the gRPC servicers."""
