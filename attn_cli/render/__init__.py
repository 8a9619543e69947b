"""Rendering: tables as data (rich, Markdown, HTML, CSV), matplotlib figures, JSON/CSV files (no click)."""
