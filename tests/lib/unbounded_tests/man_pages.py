"""The man pages' scdoc sources (man/*.scd) as the documentation checks read them: a page's text, one
of its sections, and the terms of a section's definition list (the lines at column 0)."""

import os
import re

from unbounded_tests import TESTS_DIR

MAN_DIR = os.path.join(os.path.dirname(TESTS_DIR), "man")


def man_page(name):
    """The scdoc source of a page by its name and section: man_page("unbounded-nvidia-setup.8")."""
    with open(os.path.join(MAN_DIR, name + ".scd"), encoding="utf-8") as f:
        return f.read()


def section(page, title):
    """The text of section `# TITLE`, up to the next section; None when the page has none."""
    m = re.search(r"^# %s\n(.*?)(?=^# |\Z)" % re.escape(title), page, re.S | re.M)
    return m.group(1) if m else None


def terms(text, mark="*"):
    """The terms of a definition list: its lines at column 0 that start with `mark` (bold `*` or
    underlined `_`), each as written."""
    return re.findall(r"^(%s.*)$" % re.escape(mark), text or "", re.M)
