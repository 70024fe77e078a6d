"""Training: objectives, schedules, scaling methods and the train loop."""
