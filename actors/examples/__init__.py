"""Runnable examples (the billing world of the demo)."""
