"""plait."""
