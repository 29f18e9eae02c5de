"""From a study to deployment: the few kernels that cover a workload mix best
(:mod:`.cover`), the dispatch table that picks one for any GEMM (:mod:`.table`,
:mod:`.selector`), audits of a table on other shapes (:mod:`.check`) and the report across
targets (:mod:`.report`)."""
