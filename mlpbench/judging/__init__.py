"""Verdicts: the gate, confirmation, A/B, between-run noise, detection."""
