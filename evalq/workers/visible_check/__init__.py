"""The fixture's visible check inside the agent's session: shim, listener, snapshot, repair cost."""
