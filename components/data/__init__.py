"""Data: fetch recipes, readers per format, vocabularies, the Parquet store, splits and batching."""
