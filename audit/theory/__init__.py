"""Closed forms of the theory: bounds, exact values and trade-off functions, one pure function each."""
