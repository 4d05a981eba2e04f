"""Helpers the tests share (not shipped in the wheel)."""
