"""approxinfer components: pure, reusable parts (no ray, no mlflow outside tracking/)."""
