"""Capacity-bounded adversaries: function classes, variational objectives, held-out scores.

This package never imports :mod:`audit`.
"""
