"""Drives the console in headless Chromium, as a person would: searches an app, opens it,
sees its instances grouped by revision, has a provider killed and sees it leave, then
resolves the interface.

Run by cli/tests/browser.rs, which starts the fleet and the console and passes the URL:

    console_browser.py URL APP

The test and the script talk over standard streams: the script prints `KILL ADDRESS` when
it wants that provider killed, and the test answers `KILLED` on a line of its own. With
INTROSPECT_SCREENSHOT=PATH set, the app page is saved there (docs/console.png).
Chromium is Debian's (`chromium`, or CHROMIUM=PATH); playwright comes from PyPI
(`scripts/setup.sh --with-browser`).
"""

import os
import shutil
import sys
import time

from playwright.sync_api import expect, sync_playwright

TIMEOUT_MS = 10_000


def main() -> int:
    url, app = sys.argv[1], sys.argv[2]
    chromium = os.environ.get("CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    if not chromium:
        print("no chromium: apt-get install chromium", file=sys.stderr)
        return 2
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=chromium, args=["--no-sandbox", "--disable-dev-shm-usage"]
        )
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        errors = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on("dialog", lambda d: errors.append("a dialog opened: " + d.message))
        page.goto(url)

        # The apps page, live, with a search box.
        expect(page.locator("#live")).to_have_text("live", timeout=TIMEOUT_MS)
        page.fill("#search", app.rsplit("-", 1)[-1])
        rows = page.locator("#apps-table tbody tr")
        expect(rows).to_have_count(1, timeout=TIMEOUT_MS)
        expect(rows.first).to_contain_text(app)

        # The app page: instances grouped by revision.
        rows.first.locator("a").click()
        expect(page.locator("main h2")).to_have_text(app, timeout=TIMEOUT_MS)
        sections = page.locator("section.revision")
        expect(sections).to_have_count(2, timeout=TIMEOUT_MS)
        first = sections.nth(0).locator("table.instances tbody tr")
        expect(first).to_have_count(2, timeout=TIMEOUT_MS)
        expect(sections.nth(1).locator("table.instances tbody tr")).to_have_count(1)
        expect(page.get_by_text("shop.OrderService:1.0:tri").first).to_be_visible()
        # A hostile value from the registry shows as text, not as markup.
        expect(page.get_by_text("<b>bold</b>").first).to_be_visible()
        if os.environ.get("INTROSPECT_SCREENSHOT"):
            page.screenshot(path=os.environ["INTROSPECT_SCREENSHOT"], full_page=True)

        # Kill a provider; its row leaves without a reload.
        victim = first.nth(0).get_attribute("data-address")
        print(f"KILL {victim}", flush=True)
        if sys.stdin.readline().strip() != "KILLED":
            print("the test did not kill the provider", file=sys.stderr)
            return 1
        killed = time.monotonic()
        expect(page.locator(f'tr[data-address="{victim}"]')).to_have_count(0, timeout=TIMEOUT_MS)
        print(f"LEFT {time.monotonic() - killed:.2f}s after the kill", flush=True)
        expect(sections.nth(0).locator("table.instances tbody tr")).to_have_count(1)
        expect(page.locator(".log")).to_contain_text(victim)

        # The service page: the endpoints a consumer gets, the killed one gone.
        page.fill("#service-name", "shop.OrderService")
        page.click("#service-form button")
        expect(page.locator("main h2")).to_have_text("shop.OrderService", timeout=TIMEOUT_MS)
        orders = page.locator("main table tbody tr", has_text=app)
        expect(orders).to_have_count(2, timeout=TIMEOUT_MS)
        expect(page.locator("main")).not_to_contain_text(victim)
        browser.close()
        if errors:
            print("page errors: " + "; ".join(errors), file=sys.stderr)
            return 1
    print("OK", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
