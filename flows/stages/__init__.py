"""One module per dvc.yaml stage, each with ``run(params, ctx) -> dict`` and ``main()``."""
