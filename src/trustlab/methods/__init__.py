"""One package per method; the id's dashes become underscores."""
