"""Drives the console in headless Chromium, as a person would: searches an app, opens it,
sees its instances grouped by revision and the difference of its two revisions, has a
provider killed and sees it leave, resolves the interface and sees who consumes it and its
routing panel (the rule in force, the broken one marked "not applied", each provider's
tag, state, weight and whether it is routed), then
opens a second app and sees self-preservation hold it when most of its providers crash at
once, and last sees a consumer whose connection was cut marked stale.

Run by cli/tests/it/browser.rs, which starts the fleet and the console and passes the URL:

    console_browser.py URL APP FLEET_APP FLEET_SIZE RULE_IN_FORCE BROKEN_RULE

With `actions` first (`console_browser.py actions URL APP`, the token in the environment
variable INTROSPECT_TEST_CONSOLE_TOKEN) it drives the write actions of a console with a
token instead: logs in, disables an instance, sees the action in the action log and the
instance marked "disabled by rule", has the test check the rule written, sees the
provider republish itself disabled, and enables it again. The script prints `CHECK DISABLED ADDRESS` and `CHECK ENABLED ADDRESS`; the test
answers `YES` when the config centre says so, or a line saying what it found.

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


def launch(p):
    chromium = os.environ.get("CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    if not chromium:
        print("no chromium: apt-get install chromium", file=sys.stderr)
        return None
    return p.chromium.launch(executable_path=chromium, args=["--no-sandbox", "--disable-dev-shm-usage"])


def ask(question: str) -> bool:
    """Asks the test to check the config centre; True when it answers YES."""
    print(question, flush=True)
    answer = sys.stdin.readline().strip()
    if answer != "YES":
        print(f"{question}: the test found {answer}", file=sys.stderr)
        return False
    return True


def actions(url: str, app: str) -> int:
    token = os.environ["INTROSPECT_TEST_CONSOLE_TOKEN"]
    with sync_playwright() as p:
        browser = launch(p)
        if browser is None:
            return 2
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        errors = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on("dialog", lambda d: errors.append("a dialog opened: " + d.message))
        page.goto(url + "#/app/" + app)

        # The token, once, for a session; then the app page with a button per instance.
        expect(page.locator("#login")).to_be_visible(timeout=TIMEOUT_MS)
        page.fill("#token", token)
        page.click("#login-form button")
        expect(page.locator("main h2")).to_have_text(app, timeout=TIMEOUT_MS)
        rows = page.locator("table.instances tbody tr")
        expect(rows).to_have_count(2, timeout=TIMEOUT_MS)
        expect(rows.first.locator("button[data-action=disable]")).to_be_visible(timeout=TIMEOUT_MS)
        expect(page.locator("#action-log")).to_contain_text("no actions yet")

        # Disable one: the log says who did what, the row says so, the rule is written.
        address = rows.first.get_attribute("data-address")
        row = page.locator(f'tr[data-address="{address}"]')
        row.locator("button[data-action=disable]").click()
        entry = page.locator("#action-log li").first
        expect(entry).to_contain_text("disable", timeout=TIMEOUT_MS)
        expect(entry).to_contain_text(address)
        expect(entry).to_contain_text("written")
        expect(entry).to_contain_text("by session:")
        expect(entry).to_contain_text(app + ".configurators")
        expect(page.locator("#action-result")).to_contain_text("written")
        expect(row.locator(".tag", has_text="disabled by rule")).to_be_visible(timeout=TIMEOUT_MS)
        if not ask(f"CHECK DISABLED {address}"):
            return 1
        # The provider applies the item to itself and republishes: the instance moves to a
        # revision whose services say disabled=true (needs providers that apply
        # `side: provider` configurators).
        own_revision = page.locator("section.revision", has=row)
        expect(own_revision).to_contain_text("disabled=true", timeout=2 * TIMEOUT_MS)

        # Enable it again: the item goes, and with it the rule.
        row.locator("button[data-action=enable]").click()
        expect(page.locator("#action-log li").first).to_contain_text("enable", timeout=TIMEOUT_MS)
        expect(page.locator("#action-log li").first).to_contain_text("deleted")
        expect(row.locator("button[data-action=disable]")).to_be_visible(timeout=TIMEOUT_MS)
        expect(page.locator("#action-log li")).to_have_count(2)
        if not ask(f"CHECK ENABLED {address}"):
            return 1
        # And back: its revision no longer says so.
        expect(page.locator("section.revision", has=row)).not_to_contain_text("disabled=true", timeout=2 * TIMEOUT_MS)
        # A hostile tag is refused with why, and logged.
        row.locator("input[data-input=tag]").fill("<b>x</b>")
        row.locator("button[data-action=tag]").click()
        expect(page.locator("#action-result")).to_contain_text("letters, digits", timeout=TIMEOUT_MS)
        expect(page.locator("#action-log li").first).to_contain_text("refused")
        browser.close()
        if errors:
            print("page errors: " + "; ".join(errors), file=sys.stderr)
            return 1
    print("OK", flush=True)
    return 0


def main() -> int:
    if sys.argv[1] == "actions":
        return actions(sys.argv[2], sys.argv[3])
    url, app, fleet_app, fleet_size = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    rule_in_force, broken_rule = sys.argv[5], sys.argv[6]
    with sync_playwright() as p:
        browser = launch(p)
        if browser is None:
            return 2
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
