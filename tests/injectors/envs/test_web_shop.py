"""web_shop: the simulated site, the evaluator, seeds under simulated agents, carried and caught errors, injection per mode."""

import json
import os

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from faultlens.injectors import envs  # noqa: E402
from faultlens.injectors.envs.web_shop.site import act, catalogue, page_for, state_of  # noqa: E402
from faultlens.middleware.model.trace import StepKind  # noqa: E402
from faultlens.middleware.replay.session import Session  # noqa: E402

from .conftest import seed_runs  # noqa: E402

SIM = {"seed": 6, "noise": 0.3, "tendencies": {}}
ENV = "web_shop"


@pytest.fixture(scope="module")
def tasks():
    return envs.get(ENV).tasks(1, 6)


@pytest.fixture(scope="module")
def seeds(tasks):
    runs = seed_runs(ENV, SIM, task_seed=1, n=6)
    assert [t.id for t, _ in runs] == [t.id for t in tasks]
    return runs


def _element(page: str, label: str) -> str:
    line = next(line for line in page.splitlines() if f'"{label}"' in line)
    return line.split("]", 1)[0] + "]"


def test_site_search_filter_sort_cart_checkout(tasks):
    task = tasks[0]
    noun = {"lamp": "desk lamp"}.get(task.metadata["category"], task.metadata["category"])
    results = act("type", f"[1] {noun}", "/", [], task)
    url, cart = state_of(results)
    assert url.startswith("/search?q=") and cart == []
    assert "[1] textbox \"Search\"" in results and "link \"Next page\"" in results
    by_price = act("select", f"{_element(results, 'Sort by')} Price: low to high", url, cart, task)
    prices = [float(x) for x in __import__("re").findall(r"— \$([\d.]+) —", by_price)]
    assert prices == sorted(prices) and prices
    # open the first product, add it, check out with express shipping, place the order
    first = next(line for line in by_price.splitlines() if " link " in line and "— $" in line)
    product = act("click", first.split(" ", 1)[0], state_of(by_price)[0], [], task)
    url, cart = state_of(product)
    assert url.startswith("/product/")
    sku = url.split("/product/")[1].split("?")[0]
    item = next(p for p in catalogue(task) if p.sku == sku)
    if not item.in_stock:
        assert "(disabled)" in product
        return
    cart_page = act("click", _element(product, "Add to cart"), url, cart, task)
    url, cart = state_of(cart_page)
    assert url == "/cart" and cart == [(sku, 1)]
    checkout = act("click", _element(cart_page, "Checkout"), url, cart, task)
    express = act("select", f"{_element(checkout, 'Shipping')} Express (+$9.99)", "/checkout", cart, task)
    order = act("click", _element(express, "Place order"), state_of(express)[0], cart, task)
    assert "Order ORD-" in order and f"[{sku}]" in order and f"${item.price + 9.99:,.2f}" in order
    assert state_of(order)[1] == []


def test_site_errors_name_the_problem(tasks):
    task = tasks[0]
    home = page_for("/", [], task).render(task)
    assert act("click", "[99]", "/", [], task).startswith("There is no element [99]")
    assert act("type", "[2] tent", "/", [], task).startswith("Element [2] is a link")
    assert act("click", "7", "/", [], task).startswith("Cannot read the action argument")
    assert "Outfitters" in home


def test_evaluator_checks_the_order_item_total_and_reported_number(tasks):
    env = envs.get(ENV)
    task = tasks[0]
    sku, qty, budget = task.metadata["sku"], task.metadata["qty"], task.metadata["needs"]["budget"]
    good = {"number": "ORD-12345", "items": [[sku, qty]], "total": 1.0, "url": "/order/ORD-12345"}
    assert env.evaluate(task, json.dumps({"reported": "ORD-12345", "orders": [good]})).success
    assert not env.evaluate(task, json.dumps({"reported": "ORD-54321", "orders": [good]})).success
    assert not env.evaluate(task, json.dumps({"reported": "ORD-12345", "orders": [{**good, "items": [["XX-0000", qty]]}]})).success
    assert not env.evaluate(task, json.dumps({"reported": "ORD-12345", "orders": [{**good, "total": budget + 5}]})).success
    assert not env.evaluate(task, json.dumps({"reported": "ORD-12345", "orders": [good, good]})).success
    assert not env.evaluate(task, json.dumps({"reported": None, "orders": []})).success


def test_tasks_are_deterministic_with_distractors(tasks):
    env = envs.get(ENV)
    again = env.tasks(1, 6)
    assert [t.model_dump() for t in tasks] == [t.model_dump() for t in again]
    assert {t.metadata["kind"] for t in tasks} == {"cheapest", "best", "colour"}
    for task in tasks:
        products = catalogue(task)
        answer = next(p for p in products if p.sku == task.metadata["sku"])
        same = [p for p in products if p.category == task.metadata["category"]]
        assert any(p.category == "accessories" for p in products)
        if task.metadata["kind"] == "cheapest":
            assert min(p.price for p in same) < answer.price  # a cheaper product misses a condition


def test_seed_runs_succeed_vary_and_replay_exactly(seeds):
    env = envs.get(ENV)
    lengths = set()
    for task, result in seeds:
        assert result.trace.outcome.success, result.trace.outcome.detail
        assert len(result.trace.steps) == len(result.recording)
        kinds = [s.kind for s in result.trace.steps]
        assert StepKind.plan in kinds and kinds[-1] == StepKind.final_answer
        assert any(s.content.startswith("Cart check:") for s in result.trace.steps)
        replay = env.run(task, session=Session(result.recording, replay_until=None), sim=SIM, trace_id=result.trace.id)
        assert replay.trace.model_dump() == result.trace.model_dump()
        lengths.add(len(result.trace.steps))
    assert len(lengths) >= 3


def test_observations_are_accessibility_trees(seeds):
    _, result = seeds[0]
    page = next(s.content for s in result.trace.steps if s.kind == StepKind.tool_result)
    assert page.startswith("URL: ") and "\nCart: " in page
    assert any(line.startswith("[1] ") for line in page.splitlines())
    call = next(s for s in result.trace.steps if s.kind == StepKind.tool_call)
    assert call.tool_name in {"click", "type", "select"}


def test_a_stale_price_is_carried_into_a_wrong_purchase(seeds):
    """Raise the listed price of the product the shopper was about to open: it buys another one."""
    env = envs.get(ENV)
    for task, seed in seeds:
        steps = seed.trace.steps
        opens = [s for s in steps if s.kind == StepKind.tool_call and s.content.startswith("Open ")]
        if not opens:
            continue
        target = opens[-1]
        name = target.content.split("Open ", 1)[1].split(" (", 1)[0]
        t = target.index - 1
        page = steps[t].content
        if steps[t].kind != StepKind.tool_result or f'link "{name}"' not in page:
            continue
        line = next(line for line in page.splitlines() if f'link "{name}"' in line)
        price = line.split("— $")[1].split(" ")[0]
        changed = page.replace(line, line.replace(f"— ${price} —", f"— ${float(price.replace(',', '')) + 500:.2f} —"))
        result = env.run(task, session=Session(seed.recording, replay_until=t, overrides={t: lambda rec: {"output": changed}}), sim=SIM)
        assert not result.trace.outcome.success
        assert not any(s.content.startswith(f"Open {name} (") for s in result.trace.steps[t:])
        return
    pytest.fail("no seed opened a product straight from a results page")


def test_the_product_page_check_catches_a_wrong_click(seeds):
    """The shopper clicks another result than it meant to: it notices on the product page and goes back."""
    env = envs.get(ENV)
    for task, seed in seeds:
        for step in seed.trace.steps:
            if step.kind != StepKind.tool_call or not step.content.startswith("Open "):
                continue
            page = seed.trace.steps[step.index - 1].content
            ids = [line.split("]")[0][1:] for line in page.splitlines() if " link " in line and "— $" in line]
            current = step.content.rsplit("[", 1)[1].rstrip("]")
            other = next((i for i in ids if i != current), None)
            if other is None:
                continue
            wrong = step.content.rsplit("[", 1)[0] + f"[{other}]"
            result = env.run(task, session=Session(seed.recording, replay_until=step.index,
                                                    overrides={step.index: lambda rec: {"content": wrong}}), sim=SIM)
            assert result.trace.outcome.success
            assert any(", not " in s.content and "Back to the results" in s.content for s in result.trace.steps)
            return
    pytest.fail("no seed opened a product from a page with two results")


@pytest.mark.slow
def test_every_applicable_mode_is_generated_and_fails_the_task_or_is_filtered(seeds, every_mode):
    tried, kept = every_mode(ENV, seeds[:3], SIM)
    assert {"R.1", "R.2", "R.3", "R.4", "PL.1", "PL.2", "PL.3", "A.1", "A.2", "A.3", "A.4", "A.5", "V.1", "V.2", "V.3"} <= tried
    assert len(kept) >= 9, kept
