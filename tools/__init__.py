"""Developer tools for Spool (not shipped with the package)."""
