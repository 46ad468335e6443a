"""Request handlers, one module per API family; each maps a request body to a response body."""
