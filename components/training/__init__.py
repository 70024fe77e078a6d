"""Training: objectives, schedules, scaling methods and the train loop. Names are defined once:
``components.training.registry.OBJECTIVES`` (objectives), ``components.training.scaling.SCALINGS``
(scaling methods), ``components.training.studies.STUDY_TASKS`` (the Shevchenko & Osokin tasks).
This file stays empty of imports: importing one training module does not import them all.
"""
