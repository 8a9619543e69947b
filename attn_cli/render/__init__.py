"""Rendering: rich tables, matplotlib figures, JSON/CSV files (no click)."""
