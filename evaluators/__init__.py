"""Evaluators score configurations; each is registered by name in the ``dse.evaluators``
entry-point group (see ``pyproject.toml``)."""
