"""The storage engine under `store.tables.Tables`, by concern, in layers (see store/tables.py)."""
