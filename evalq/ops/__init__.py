"""Operating a running study from the database: status, recovery, resubmission, environments."""
