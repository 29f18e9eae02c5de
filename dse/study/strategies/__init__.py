"""The search strategies dse registers (ask/tell, exhaustive, ladder) and the whole-space
searches they and ``dse search`` use."""
