"""Sphinx configuration of the course website (`make site`; README, "The course as a website").

`python -m kpca_lib.course.site` stages the lectures (notebooks/) and the homework (exercises/)
next to this file and builds them as they are stored: nothing is executed, nothing is fetched
at build time or when a page is read (math, widgets and the theme are served from the site).
"""

import os

project = "Kernel PCA: a course"
author = "The kpca-course authors"
copyright = "the kpca-course authors; lectures and exercises CC BY 4.0, code MIT"

extensions = ["myst_nb", "sphinx-mathjax-offline"]
exclude_patterns = ["_build", "**.ipynb_checkpoints"]

# The notebooks are stored executed (`make notebooks`); the homework is shown unanswered.
nb_execution_mode = "off"
# Saved widget state is drawn by the widget manager served from _static/ (no CDN, no RequireJS).
nb_ipywidgets_js = {"mathjax2-shim.js": {}, "widgets/embed.js": {}}
myst_enable_extensions = ["dollarmath", "amsmath"]
myst_heading_anchors = 3
suppress_warnings = ["mystnb.unknown_mime_type"]

html_theme = "sphinx_book_theme"
html_title = project
html_static_path = ["_static"]
html_last_updated_fmt = None
html_context = {"default_mode": "light"}  # the figures are drawn on white
html_show_sourcelink = False

# Launch links: each lecture opens on Binder, which builds environment.yml from the repository.
repository_url = os.environ["KPCA_SITE_REPOSITORY"]
html_theme_options = {
    "repository_url": repository_url,
    "repository_branch": os.environ.get("KPCA_SITE_BRANCH", "main"),
    "path_to_docs": "",
    "use_repository_button": True,
    "launch_buttons": {"binderhub_url": "https://mybinder.org", "notebook_interface": "jupyterlab"},
    "show_toc_level": 2,
}
