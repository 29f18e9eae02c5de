"""The ascend_bmm family: its record (``family``) and its commands (``cli``)."""
