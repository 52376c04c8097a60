"""Agent workers: fresh workspaces and profiles, agent adapters, the trial runner."""
