"""Kernel families, one file per op family (op_<family>.py). Importing registers them all."""
