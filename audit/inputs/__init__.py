"""The inputs layer: the neighbouring datasets, given, generated, widened, searched or drawn."""
