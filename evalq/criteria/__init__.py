"""Named criteria: the several things a fixture measures per run, each with its own result.

A fixture may declare criteria (`[[criteria]]` in fixture.toml): a named group of hidden
checks, a rule over the agent's normalized trajectory, or a question for blinded raters.
Each run stores one result per criterion (passed true/false/null with its evidence), the run's
outcome comes from the required ones, and the report gives each criterion's rate per
condition and track.
"""
