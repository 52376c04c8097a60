"""Agent adapters: one module per coding agent; `registry` finds them by name."""
