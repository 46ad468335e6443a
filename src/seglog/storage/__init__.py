"""seglog.storage."""
