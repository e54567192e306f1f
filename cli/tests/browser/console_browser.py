"""Drives the console in headless Chromium, as a person would: searches an app, opens it,
sees its instances grouped by revision and the difference of its two revisions, has a
provider killed and sees it leave, resolves the interface and sees who consumes it and its
routing panel (the rule in force, the broken one marked "not applied", each provider's
tag, state, weight and whether it is routed), then
opens a second app and sees self-preservation hold it when most of its providers crash at
once, and last sees a consumer whose connection was cut marked stale.

Run by cli/tests/browser.rs, which starts the fleet and the console and passes the URL:

    console_browser.py URL APP FLEET_APP FLEET_SIZE RULE_IN_FORCE BROKEN_RULE

The test and the script talk over standard streams: the script prints `KILL ADDRESS` when
it wants that provider killed, and the test answers `KILLED` on a line of its own; it
prints `CRASH N` when it wants N of FLEET_APP's providers to crash at once, and the test
answers `CRASHED`; it prints `CUT` when it wants the registered consumer's connection cut
and the fleet changed, and the test answers `CUT-DONE`. With
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
    url, app, fleet_app, fleet_size = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    rule_in_force, broken_rule = sys.argv[5], sys.argv[6]
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
        # Its consumers: the one registered consumer, routing to what the console sees.
        consumer = page.locator("#consumers tbody tr")
        expect(consumer).to_have_count(1, timeout=TIMEOUT_MS)
        expect(consumer.first).to_contain_text("shop-web")
        expect(consumer.first.locator("[data-verdict=same]")).to_be_visible(timeout=TIMEOUT_MS)

        # The difference of the two revisions, as `introspect revision` prints it.
        page.click("text=diff")
        expect(page.locator("main")).to_contain_text("timeout", timeout=TIMEOUT_MS)
        expect(page.locator("main")).to_contain_text("-> 1500")
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
        orders = page.locator("main > table tbody tr", has_text=app)
        expect(orders).to_have_count(2, timeout=TIMEOUT_MS)
        expect(page.locator("main")).not_to_contain_text(victim)

        # Its routing panel: the rule in force, the broken one marked as not applied with
        # why, and per provider its tag, state, weight and whether calls go to it.
        routing = page.locator("#routing")
        in_force = routing.locator(f'li[data-rule="{rule_in_force}"]')
        expect(in_force).to_contain_text("in force", timeout=TIMEOUT_MS)
        broken = routing.locator(f'li.not-applied[data-rule="{broken_rule}"]')
        expect(broken).to_contain_text("not applied")
        expect(broken).to_contain_text("not YAML")
        routes = routing.locator("table.routes tbody tr", has_text=app)
        expect(routes).to_have_count(2, timeout=TIMEOUT_MS)
        expect(routes.first).to_contain_text("enabled")
        expect(routes.first.locator(".tag.ok", has_text="routed")).to_be_visible()
        expect(routes.first.locator("td.num")).to_have_text("100")
        # Asked as a `Refund` call, the rule routes nothing out: every provider is routed.
        page.fill("#route-method", "Refund")
        page.click("#route-form button")
        expect(routing.locator("p.muted").first).to_contain_text("method Refund", timeout=TIMEOUT_MS)
        expect(routing.locator("table.routes tbody tr[data-routed=false]")).to_have_count(0)

        # A second app loses most of its providers at once: self-preservation holds them,
        # and the page says so with the count and the time left, without a reload.
        page.goto(url + "#/app/" + fleet_app)
        expect(page.locator("main h2")).to_have_text(fleet_app, timeout=TIMEOUT_MS)
        expect(page.locator("table.instances tbody tr")).to_have_count(fleet_size, timeout=TIMEOUT_MS)
        crashed = fleet_size * 3 // 4
        print(f"CRASH {crashed}", flush=True)
        if sys.stdin.readline().strip() != "CRASHED":
            print("the test did not crash the providers", file=sys.stderr)
            return 1
        expect(page.get_by_text(f"held: {crashed}")).to_be_visible(timeout=TIMEOUT_MS)
        expect(page.locator("main")).to_contain_text("protection active")
        expect(page.locator("main .countdown").first).to_contain_text("s left")
        expect(page.locator("main")).to_contain_text("self-preservation")

        # Who consumes the interface; then the consumer's connection is cut and the fleet
        # grows: the console marks its set stale, without a reload.
        page.fill("#service-name", "shop.OrderService")
        page.click("#service-form button")
        expect(page.locator("main h2")).to_have_text("shop.OrderService", timeout=TIMEOUT_MS)
        row = page.locator("#consumers tbody tr", has_text="shop-web")
        expect(row.locator("[data-verdict=same]")).to_be_visible(timeout=TIMEOUT_MS)
        print("CUT", flush=True)
        if sys.stdin.readline().strip() != "CUT-DONE":
            print("the test did not cut the consumer", file=sys.stderr)
            return 1
        expect(row.locator("[data-verdict=stale]")).to_be_visible(timeout=2 * TIMEOUT_MS)
        expect(row).to_contain_text("stale for")
        expect(page.locator("#consumers h3")).to_contain_text("1 stale")
        browser.close()
        if errors:
            print("page errors: " + "; ".join(errors), file=sys.stderr)
            return 1
    print("OK", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
