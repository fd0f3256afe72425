"""The web view (``/ui/``): queues, gangs, profiles and why a pod is pending, live.

:mod:`.shape` (pure) makes the page's JSON from plain facts, :mod:`.collect` reads the
facts from a scheduler, :mod:`.web` serves the page and its JSON (``kubesched run``,
``kubesched ui``) or writes it as one self-contained file (``kubesched simulate
--html``). The page itself is plain HTML, CSS and JavaScript in ``static/`` (no build)."""
