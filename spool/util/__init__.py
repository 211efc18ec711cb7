"""Small shared utilities: an injectable clock and crash-safe file writes."""
