"""API routes, one module per feature."""
