"""Running a pipeline: the runner (``pipeline``), its plan and checklist (``plan``), the embedded demo (``demo``)."""
