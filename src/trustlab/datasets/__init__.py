"""Small real data sets and loaders for real formats (each bundled folder has a SOURCE.md)."""
