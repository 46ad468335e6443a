"""seglog.cli."""
