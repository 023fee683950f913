"""LTX-2 rules as pure functions: tiers, modes, buckets and tokens, the trainer-config mirror.

Nothing here does I/O beyond reading a file it is handed, and nothing here knows the store.
"""
