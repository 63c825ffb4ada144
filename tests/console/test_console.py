"""The console end to end in headless Chromium against the real broker: what the API holds
shows up on the page (and keeps showing up without a reload), and what the page does with a
click is what the API then reports."""

from __future__ import annotations

import asyncio
import concurrent.futures

from playwright.sync_api import expect

from tests.conftest import backdate_segments, connection
from tests.console.conftest import push


def row(page, key: str):
    return page.locator(f'tr[data-key="{key}"]')


def confirm(page, label: str) -> None:
    page.locator("dialog[open]").get_by_role("button", name=label).click()


def test_pushed_messages_appear_and_new_ones_arrive_without_a_reload(page, api, name):
    push(api, name, [{"order": 1, "customer": {"name": "Alice"}}], partition="alice")
    page.goto(f"/#/queues/{name}/messages")
    messages = page.locator("section.card table.grid tbody")
    expect(messages).to_contain_text("alice")
    expect(messages).to_contain_text('"order":1')

    page.evaluate("window.loadedOnce = true")
    push(api, name, [{"order": 2, "marker": "arrived-live"}], partition="bob")
    expect(messages).to_contain_text("arrived-live")
    assert page.evaluate("window.loadedOnce") is True  # the same page, refreshed in place

    page.get_by_text('"order":1').click()  # inspect: the whole payload, pretty-printed
    expect(page.locator("dialog[open] pre.json")).to_contain_text('"name": "Alice"')


def test_a_message_pushed_from_the_console_is_stored(page, api, name):
    push(api, name, [{"seed": True}])
    page.goto(f"/#/queues/{name}/messages")
    page.get_by_role("button", name="Push message").click()
    dialog = page.locator("dialog[open]")
    dialog.locator("input[name=partition]").fill("from-console")
    dialog.locator("textarea[name=payload]").fill('{"typed": "in the browser"}')
    confirm(page, "Push")
    expect(page.locator(".toast")).to_contain_text("Pushed")
    stored = api.get("/api/v1/messages", params={"queue": name, "partition": "from-console"}).json()
    assert [m["data"] for m in stored["messages"]] == [{"typed": "in the browser"}]

    row(page, stored["messages"][0]["transactionId"]).get_by_role("button", name="Push copy").click()
    expect(page.locator(".toast").last).to_contain_text("Copy pushed")
    copies = api.get("/api/v1/messages", params={"queue": name, "partition": "from-console"}).json()
    assert copies["total"] == 2 and {m["data"]["typed"] for m in copies["messages"]} == {"in the browser"}


def test_the_overview_lists_the_queue_with_its_depth(page, api, name):
    push(api, name, [{"n": n} for n in range(3)])
    page.goto("/")
    queue_row = row(page, name)
    expect(queue_row.locator("td").nth(3)).to_have_text("3")  # depth, from the stats loop
    expect(page.locator("#health-db")).to_have_text("PostgreSQL connected")
    expect(page.locator(".kpi").first).to_contain_text("Queues")
    assert page.locator(".chart canvas").count() >= 2
    [database] = api.get("/api/v1/status").json()["databases"]
    database_row = page.locator("#databases tbody tr")
    expect(database_row).to_have_count(1)
    expect(database_row.locator("td").nth(0)).to_have_text(database["id"])
    expect(database_row.locator("td").nth(1)).to_have_text("catalog")
    expect(database_row.locator("td").nth(2)).to_have_text("healthy")
    queue_row.click()
    expect(page.locator("h1")).to_have_text(name)


def test_messages_expired_by_a_ttl_are_counted_on_the_overview_and_the_queue_page(page, api, name, database_url):
    api.post("/api/v1/configure", json={"queue": name, "options": {"ttl": 600}}).raise_for_status()
    push(api, name, [{"n": 1}, {"n": 2}])
    # an hour-old backlog without waiting an hour; asyncpg runs in a thread of its own, away
    # from the event loop Playwright keeps in this one
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        pool.submit(asyncio.run, backdate_in(database_url, name)).result()
    assert api.get(f"/api/v1/pop/queue/{name}", params={"wait": "false"}).status_code == 204

    page.goto("/")
    expect(row(page, name).locator("td").nth(8)).to_have_text("2")  # Expired
    page.goto(f"/#/queues/{name}/overview")
    expect(page.locator("dl.facts")).to_contain_text("Expired (ttl)2")


async def backdate_in(database_url: str, queue: str) -> None:
    async with connection(database_url) as conn:
        await backdate_segments(conn, queue, 7200)


def test_a_dead_letter_is_replayed_by_a_click(page, api, name):
    push(api, name, [{"job": "fragile"}], partition="p1")
    message = api.get(f"/api/v1/pop/queue/{name}").json()["messages"][0]
    acked = api.post("/api/v1/ack", json={"transactionId": message["transactionId"], "partitionId":
                                          message["partitionId"], "leaseId": message["leaseId"], "status": "dlq",
                                          "error": "boom: the printer is on fire"}).json()
    assert acked[0]["dlq"] is True

    page.goto(f"/#/queues/{name}/dlq")
    dead = page.locator("section.card table.grid tbody tr").filter(has_text="the printer is on fire")
    expect(dead).to_have_count(1)
    dead.get_by_role("button", name="Replay").click()
    expect(page.locator(".toast")).to_contain_text("Replayed to p1")
    expect(page.locator("td.empty")).to_contain_text("No dead letters")

    assert api.get("/api/v1/dlq", params={"queue": name}).json()["total"] == 0
    again = api.get(f"/api/v1/pop/queue/{name}").json()["messages"]
    assert [m["data"] for m in again] == [{"job": "fragile"}]


def test_an_option_is_edited_with_merge_semantics(page, api, name):
    before = api.post("/api/v1/configure", json={"queue": name, "options": {"retryLimit": 7}}).json()["options"]
    page.goto(f"/#/queues/{name}/settings")
    lease = page.locator("input[name=leaseTime]")
    expect(lease).to_have_value(str(before["leaseTime"]))
    lease.fill("123")
    page.get_by_role("button", name="Save changes").click()
    expect(page.locator(".toast")).to_contain_text("Saved: leaseTime")

    after = api.get(f"/api/v1/status/queues/{name}").json()["options"]
    assert after == {**before, "leaseTime": 123}  # only the changed option moved


def test_partitions_are_searched_and_paged_by_the_broker(page, api, name):
    api.post("/api/v1/push", json={"items": [
        {"queue": name, "partition": f"{kind}-{n:02d}", "payload": {"n": n}}
        for kind in ("alpha", "beta") for n in range(30)]}).raise_for_status()
    page.goto(f"/#/queues/{name}/partitions")
    pager = page.locator(".pager span")
    expect(pager).to_have_text("1–25 of 60")
    page.get_by_role("button", name="Next ›").click()
    expect(pager).to_have_text("26–50 of 60")

    page.get_by_label("Search partitions").fill("beta-1")
    expect(pager).to_have_text("1–10 of 10")
    names = page.locator("section.card table.grid tbody tr td:first-child").all_inner_texts()
    assert names == [f"beta-1{n}" for n in range(10)]

    page.get_by_label("Search partitions").fill("gamma")
    expect(page.locator("td.empty")).to_contain_text("No partition name starts with “gamma”")


def test_a_group_is_seeked_to_the_end_and_back_to_a_time(page, api, name):
    group = f"g-{name}"
    push(api, name, [{"n": n} for n in range(5)])
    popped = api.get(f"/api/v1/pop/queue/{name}", params={"consumerGroup": group, "subscriptionMode": "all",
                                                         "batch": 1}).json()["messages"]
    api.post("/api/v1/ack", json={"transactionId": popped[0]["transactionId"], "partitionId": popped[0]["partitionId"],
                                  "leaseId": popped[0]["leaseId"], "consumerGroup": group}).raise_for_status()

    def lag() -> int:
        return api.get(f"/api/v1/consumer-groups/{group}", params={"queue": name}).json()[name]["totalLag"]

    assert lag() == 4
    page.goto("/#/groups")
    entry = row(page, f"{group}@{name}")
    expect(entry.locator("td").nth(3)).to_have_text("4")
    entry.get_by_role("button", name="Seek to end").click()
    confirm(page, "Seek to end")
    expect(entry.locator("td").nth(3)).to_have_text("0")
    assert lag() == 0

    entry.get_by_role("button", name="Seek to time…").click()
    page.locator("dialog[open] input[name=at]").fill("2020-01-01T00:00:00")
    confirm(page, "Seek")
    expect(entry.locator("td").nth(3)).to_have_text("5")
    assert lag() == 5

    entry.click()  # lag per partition, from the broker's paged detail (keyed by queue name)
    partitions = page.locator("#group-partitions table.grid tbody tr")
    expect(partitions).to_have_count(1)
    expect(partitions.locator("td").nth(0)).to_have_text("Default")
    expect(partitions.locator("td").nth(3)).to_have_text("5")
    expect(page.locator("#group-partitions")).to_contain_text("1–1 of 1")


def test_a_message_timeline_shows_its_push_and_its_trace_events(page, api, name):
    push(api, name, [{"step": 0}], partition="t")
    message = api.get(f"/api/v1/pop/queue/{name}").json()["messages"][0]
    for event, data in (("received", {"by": "worker-1"}), ("charged", {"amount": 42})):
        api.post("/api/v1/traces", json={"transactionId": message["transactionId"], "partitionId":
                                         message["partitionId"], "eventType": event, "data": data,
                                         "traceNames": [f"flow-{name}"]}).raise_for_status()
    page.goto(f"/#/traces/{message['partitionId']}/{message['transactionId']}")
    events = page.locator("ol.timeline li")
    expect(events).to_have_count(3)
    assert [e.split("\n")[0] for e in events.locator(".what .badge").all_inner_texts()] == [
        "pushed", "received", "charged"]
    expect(events.nth(2)).to_contain_text('"amount": 42')
    expect(events.nth(1)).not_to_contain_text("__QUEUE_MODE__")  # queue mode is not named as a group

    page.get_by_label("Search trace names").fill(f"flow-{name}")
    names = row(page, f"flow-{name}")
    expect(names.locator("td").nth(1)).to_have_text("2")  # events
    names.click()
    by_name = page.locator("section.card").filter(has_text=f"flow-{name}").last
    expect(by_name).to_contain_text("charged")
    expect(by_name).to_contain_text(f"{name} / t")
    expect(by_name).to_contain_text("1–2 of 2")


def test_a_queue_is_deleted_only_after_typing_its_name(page, api, name):
    push(api, name, [{"doomed": True}])
    page.goto(f"/#/queues/{name}/settings")
    page.get_by_role("button", name="Delete this queue…").click()
    page.locator("dialog[open] input[name=confirm]").fill("not-the-name")
    confirm(page, "Delete queue")
    assert api.get(f"/api/v1/status/queues/{name}").status_code == 200  # a wrong name deletes nothing

    page.get_by_role("button", name="Delete this queue…").click()
    page.locator("dialog[open] input[name=confirm]").fill(name)
    confirm(page, "Delete queue")
    expect(page.locator(".toast").last).to_contain_text(f"Queue {name} deleted")
    assert api.get(f"/api/v1/status/queues/{name}").status_code == 404


def test_dead_letters_are_purged_after_typing_the_queue_name(page, api, name):
    push(api, name, [{"n": n} for n in range(2)])
    for message in api.get(f"/api/v1/pop/queue/{name}", params={"batch": 2}).json()["messages"]:
        api.post("/api/v1/ack", json={"transactionId": message["transactionId"], "partitionId": message["partitionId"],
                                      "leaseId": message["leaseId"], "status": "dlq", "error": "poison"})
    page.goto(f"/#/queues/{name}/dlq")
    expect(page.locator(".pager span")).to_have_text("1–2 of 2")
    page.get_by_role("button", name="Purge all dead letters…").click()
    page.locator("dialog[open] input[name=confirm]").fill(name)
    confirm(page, "Purge")
    expect(page.locator(".toast")).to_contain_text("2 dead letters purged")
    expect(page.locator(".pager span")).to_have_text("0–0 of 0")
    assert api.get("/api/v1/dlq", params={"queue": name}).json()["total"] == 0
