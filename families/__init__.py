"""The families dse ships, each as the record that binds its search space (``search_spaces``)
to its model, its library builder and its commands (``evaluators``).

The layering (pyproject.toml's import-linter contracts): a family's record and commands here may
import both packages; an evaluator may import the spaces it scores; a search space imports
neither. So a space's rules compute what they need from the target alone, and a model lives with
the evaluators, whoever writes the family (docs/plugins.md).
"""
