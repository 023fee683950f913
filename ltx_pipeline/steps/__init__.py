"""Heavy steps shared by several phases (preprocessing for autotune's sanity set and for training).

Only phases past the approval gate call them; they launch through the run's journal.
"""
