"""A Chromium tab cut off from the network: every request off `base` (the server under test)
is refused and noted in `tab.outside`, and console errors, page errors and failed requests
to `base` are noted in `tab.troubles`. The course site's test and the dashboard's use it."""

from __future__ import annotations

from typing import Any


def offline_tab(browser: Any, base: str, **options: Any) -> tuple[Any, Any]:
    """(context, tab): close the context when done."""
    context = browser.new_context(**options)
    tab = context.new_page()
    tab.troubles = []
    tab.outside = []

    def route(request_route: Any) -> None:
        if request_route.request.url.startswith(base):
            request_route.continue_()
        else:
            tab.outside.append(request_route.request.url)
            request_route.abort()

    tab.route("**/*", route)
    tab.on("console", lambda m: m.type == "error" and tab.troubles.append(f"console: {m.text}"))
    tab.on("pageerror", lambda e: tab.troubles.append(f"page error: {e}"))
    tab.on("requestfailed", lambda r: r.url.startswith(base) and tab.troubles.append(f"failed: {r.url}"))
    return context, tab
