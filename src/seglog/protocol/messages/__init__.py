"""Every API seglog speaks, described once for both directions."""
