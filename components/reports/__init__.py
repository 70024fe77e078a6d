"""Tables and figures from metric records (matplotlib, Agg backend; no I/O, no logging)."""
