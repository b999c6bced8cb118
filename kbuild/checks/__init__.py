"""Checks of generated pages that need no model."""
