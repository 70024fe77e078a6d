"""Experiment tracking: the :class:`Tracker` protocol, an MLflow implementation and a null one.

Only this package imports mlflow (DESIGN.md layering). Stages and sweeps talk to a ``Tracker``.
"""
from components.tracking.base import Tracker, NullTracker, default_tracking_uri, make_tracker
from components.tracking.provenance import DataInput, stage_provenance

__all__ = ["Tracker", "NullTracker", "default_tracking_uri", "make_tracker", "DataInput", "stage_provenance"]
