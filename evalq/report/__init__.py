"""Reports computed from the results database: compute.py makes one result, write.py renders
it as JSON, Markdown and HTML."""
