"""seglog.protocol."""
