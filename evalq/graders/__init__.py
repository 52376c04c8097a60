"""Grading agent output with hidden tests in a sandbox."""
