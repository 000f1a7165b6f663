"""One module per resource of the API."""
