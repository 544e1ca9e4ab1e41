"""Browser tests: the course in a real JupyterLab (pytest marker ``browser``)."""
