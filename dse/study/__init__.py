"""Studies: study files, the ask/tell runner, and queries over stored results."""
