"""Checks for changes to the package itself: ``fingerprint`` proves a restructuring changed no exported byte."""
