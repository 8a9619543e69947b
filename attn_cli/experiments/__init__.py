"""Experiment modules: one per table or figure family.

Design notes: ``docs/design.md``, section ``attn_cli.experiments``.
"""
