"""What the metrics store costs."""
