"""Reports: run records, tables, CSV/JSON, plots."""
