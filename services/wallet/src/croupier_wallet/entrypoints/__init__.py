"""Transport: gRPC servicers and bus consumers. They translate and call the use cases, nothing more."""
