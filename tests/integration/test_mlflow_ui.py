"""The MLflow UI as a user opens it: ``make ui`` on a real store, driven in headless Chromium.

A store in a temporary folder is filled through the project's ``MlflowTracker`` the way a stage
fills it: a stage run ``train@pos`` (provenance tags, a data input with its DVC digest), nested in
it a sweep's parent run carrying the best trial's metric and a PNG artifact, and two nested trial
runs with their metrics. ``make ui`` runs on that store (its commands taken from ``make -n``, so
the test runs exactly what the Makefile runs, without re-installing the project); Chromium, with a
fresh profile as a first-time user has, opens the link ``make ui`` printed for the experiment and
must land on the runs table (not the GenAI overview), list the stage, sweep and trial runs once
the rows are expanded, show a trial's metric on its run page, and load the PNG in the artifact view.
Along the way it checks the one click ``make ui`` asks for: MLflow 3.17 shows pages without a
``workflowType`` URL parameter (run pages) in its GenAI view until the browser has chosen
"Model training" on the switch at the top left, which the browser then remembers.

Screenshots of each step go to ``$APPROXINFER_UI_SCREENSHOTS`` (a folder; default: the test's tmp
folder), for a human to look at. Needs Debian's ``chromium`` and ``chromium-driver``: without them
the test is skipped (an error under ``APPROXINFER_REQUIRE_SERVICES=1``, as in CI).
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.integration.conftest import REPO, _end_group, _unavailable, free_port, wait_healthy

pytestmark = pytest.mark.integration

EXPERIMENT = "ui-check"
STAGE_RUN, SWEEP_RUN, TRIALS = "train@pos", "sweep/pos", ("trial_0", "trial_1")
TRIAL_SCORES = (0.8125, 0.8750)
FIGURE = "pos_sweep_curves.png"
DIGEST = "6d90930863ed96ac65af05e2d3d76208.dir"
WAIT = 90          # seconds for one page state on a loaded 2-core machine


def _browser_binaries() -> tuple[str, str]:
    chromium = next((p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None)
    driver = shutil.which("chromedriver")
    if not chromium or not driver:
        missing = [n for n, p in (("chromium", chromium), ("chromedriver", driver)) if not p]
        _unavailable(f"no {' and no '.join(missing)} on PATH (apt-get install -y chromium chromium-driver)")
    return chromium, driver


@dataclass(frozen=True)
class Store:
    uri: str
    experiment_id: str
    stage_run: str
    sweep_run: str
    trial_runs: tuple[str, ...]


def _fill_store(folder: Path) -> Store:
    """A stage run, its sweep's parent run (best metric, PNG) and two trials, as the stages log them."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from components.tracking.mlflow_tracker import MlflowTracker
    from components.tracking.provenance import DataInput

    uri = f"sqlite:///{folder / 'mlflow.db'}"
    tracker = MlflowTracker(EXPERIMENT, tracking_uri=uri, artifact_root=(folder / "mlartifacts").as_uri())
    exp = tracker.ensure_experiment()
    tracker.set_provenance({"dvc.stage": STAGE_RUN, "mlflow.source.git.commit": "0" * 40, "git.dirty": "false"})
    with tracker.start_run(STAGE_RUN, tags={"stage": "train", "task": "pos"}) as stage:
        tracker.log_inputs([DataInput(path="data/prepared/pos", digest=DIGEST, nfiles=6, size=1313828)])
        with tracker.start_run(SWEEP_RUN, parent_run_id=stage, tags={"stage": "train"}) as sweep:
            trials = []
            for name, score in zip(TRIALS, TRIAL_SCORES):
                with tracker.start_run(name, parent_run_id=sweep, tags={"sweep": "pos"}) as trial:
                    for epoch in range(3):
                        tracker.log_metrics({"dev_score": score - 0.1 * (2 - epoch)}, step=epoch)
                    tracker.log_params({"train.optim.lr": 10 ** -(2 + len(trials))})
                trials.append(trial)
            tracker.log_metrics({"best_dev_score": max(TRIAL_SCORES)})
            fig, ax = plt.subplots(figsize=(4, 3))
            ax.plot([0, 1, 2], [0.61, 0.71, 0.81], label=TRIALS[0])
            ax.plot([0, 1, 2], [0.65, 0.75, 0.875], label=TRIALS[1])
            ax.legend()
            tracker.log_figure(fig, FIGURE)
            plt.close(fig)
        tracker.log_metrics({"test_accuracy": 0.8612})
    return Store(uri=uri, experiment_id=exp, stage_run=stage, sweep_run=sweep, trial_runs=tuple(trials))


def _make_ui_commands(store_uri: str, port: int) -> tuple[str, str]:
    """The ``make ui`` recipe for this store and port, as ``make -n`` prints it: (links, server)."""
    if not shutil.which("make"):
        _unavailable("no make on PATH")
    out = subprocess.run(["make", "-s", "-n", "-o", ".venv/.installed", "ui", f"STORE={store_uri}", f"PORT={port}",
                          "UI_HOST=127.0.0.1"], cwd=REPO, capture_output=True, text=True, timeout=60, check=True).stdout
    lines = out.replace("\\\n", " ").splitlines()
    links = [ln for ln in lines if "mlflow_tracker links" in ln]
    server = [ln for ln in lines if "mlflow server" in ln]
    assert len(links) == 1 and len(server) == 1, f"unexpected `make -n ui` output:\n{out}"
    return links[0], server[0]


@pytest.fixture(scope="module")
def ui(tmp_path_factory: pytest.TempPathFactory):
    _browser_binaries()
    folder = tmp_path_factory.mktemp("mlflow-ui")
    store = _fill_store(folder)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    links_cmd, server_cmd = _make_ui_commands(store.uri, port)
    env = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}
    printed = subprocess.run(["bash", "-c", links_cmd], cwd=REPO, env=env, capture_output=True, text=True,
                             timeout=120, check=True).stdout
    log = folder / "server.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(["bash", "-c", server_cmd], cwd=folder, env=env, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_healthy(url, proc, log, "`make ui`", timeout_s=180)
        yield store, url, printed
    finally:
        _end_group(proc)


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory):
    chromium, driver_path = _browser_binaries()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = chromium
    profile = tmp_path_factory.mktemp("chromium-profile")       # a first-time user: no saved UI settings
    for arg in ("--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage",
                "--window-size=1600,1000", f"--user-data-dir={profile}"):
        opts.add_argument(arg)
    drv = webdriver.Chrome(service=Service(driver_path), options=opts)
    drv.set_page_load_timeout(WAIT)
    try:
        yield drv
    finally:
        drv.quit()


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = os.environ.get("APPROXINFER_UI_SCREENSHOTS")
    path = Path(folder) if folder else tmp_path_factory.mktemp("screenshots")
    path.mkdir(parents=True, exist_ok=True)
    return path


def _wait(drv, what: str, cond, timeout: float = WAIT):
    from selenium.common.exceptions import TimeoutException
    from selenium.webdriver.support.ui import WebDriverWait
    try:
        return WebDriverWait(drv, timeout, poll_frequency=0.5).until(lambda d: cond(d))
    except TimeoutException:
        shots = getattr(drv, "failure_screenshots", None)
        if shots is not None:
            drv.save_screenshot(str(shots / "failure.png"))
        body = drv.find_element("tag name", "body").text[:3000] + getattr(drv, "failure_html", "")[:3000]
        raise AssertionError(f"waited {timeout} s for {what}; at {drv.current_url} the page reads:\n{body}") from None


def _link(drv, text: str):
    from selenium.webdriver.common.by import By
    found = drv.find_elements(By.XPATH, f"//a[normalize-space()='{text}']")
    return found[0] if found else None


def _expand(drv, run_name: str) -> None:
    """Click the +/- button in the run-name cell of ``run_name``'s row (shows its child runs)."""
    from selenium.webdriver.common.by import By
    cell = _link(drv, run_name).find_element(By.XPATH, "./ancestor::div[@role='gridcell'][1]")
    cell.find_element(By.CSS_SELECTOR, "button").click()


def test_mlflow_ui_as_a_user_opens_it(ui, browser, shots):
    store, url, printed = ui
    drv = browser
    drv.failure_screenshots = shots        # _wait saves the page it gave up on as failure.png
    # the link `make ui` printed for the experiment
    m = re.search(rf"^\s*{re.escape(EXPERIMENT)}: (\S+)$", printed, re.M)
    assert m, f"`make ui` printed no link for {EXPERIMENT!r}:\n{printed}"
    link = m.group(1)
    assert link.startswith(f"{url}/#/experiments/{store.experiment_id}/runs")

    # 1. the runs table, not the GenAI overview
    drv.get(link)
    _wait(drv, "the runs table with the stage run", lambda d: _link(d, STAGE_RUN))
    assert re.search(rf"#/experiments/{store.experiment_id}/runs\b", drv.current_url), drv.current_url
    assert "/overview" not in drv.current_url
    body = drv.find_element("tag name", "body").text
    assert "Run Name" in body and "matching runs" in body, body[:2000]
    assert "Token Usage" not in body        # the GenAI overview's panels

    # 2. the stage run, its sweep's parent run and the nested trials, rows expanded as a user does
    _expand(drv, STAGE_RUN)
    _wait(drv, f"the nested run {SWEEP_RUN}", lambda d: _link(d, SWEEP_RUN))
    _expand(drv, SWEEP_RUN)
    _wait(drv, "the nested trial runs", lambda d: all(_link(d, t) for t in TRIALS))
    assert "4 matching runs" in drv.find_element("tag name", "body").text
    dataset = _wait(drv, "the stage run's dataset input", lambda d: "data/prepared/pos" in d.find_element(
        "tag name", "body").text)
    assert dataset
    drv.save_screenshot(str(shots / "1_runs_table.png"))

    # 3. a trial's metric on its run page
    _link(drv, TRIALS[1]).click()
    _wait(drv, "the trial's run page with its dev_score", lambda d: "dev_score" in d.find_element(
        "tag name", "body").text)
    _wait(drv, "the trial's final dev_score value", lambda d: re.search(
        r"0\.87(5|50*)\b", d.find_element("tag name", "body").text))
    assert store.trial_runs[1] in drv.current_url
    drv.save_screenshot(str(shots / "2_trial_metrics.png"))

    # 4. MLflow 3.17 shows a page whose URL has no workflowType (a run page) in its GenAI view until
    # the browser has chosen "Model training" (its default is GenAI; mlflow.experimentKind is not
    # consulted): one click on the switch, as `make ui` says, and the browser keeps that choice
    if "Evaluation runs" in drv.find_element("tag name", "body").text:
        drv.find_element("xpath", "//*[@role='button'][normalize-space()='Model training']").click()
        _wait(drv, "the runs table after choosing Model training", lambda d: re.search(
            rf"#/experiments/{store.experiment_id}/runs\b", d.current_url) and _link(d, STAGE_RUN))

    # 5. the sweep's PNG in its artifact view (a URL without workflowType: the saved choice holds)
    drv.get(f"{url}/#/experiments/{store.experiment_id}/runs/{store.sweep_run}/artifacts")
    _wait(drv, "the run page in the Model training view", lambda d: "Model registry" in d.find_element(
        "tag name", "body").text and "Evaluation runs" not in d.find_element("tag name", "body").text)
    innermost = f"//*[normalize-space()='{FIGURE}' and not(*[normalize-space()='{FIGURE}'])]"
    node = _wait(drv, f"{FIGURE} in the artifact tree", lambda d: d.find_elements("xpath", innermost))[0]
    drv.failure_html = node.find_element("xpath", "./ancestor::*[3]").get_attribute("outerHTML")
    node.click()

    def loaded_image(d):
        return d.execute_script(
            "return Array.from(document.images).filter(i => i.complete && i.naturalWidth >= 300"
            " && i.naturalHeight >= 200 && i.getBoundingClientRect().width > 100)"
            ".map(i => [i.src.slice(0, 200), i.naturalWidth, i.naturalHeight]);")
    images = _wait(drv, f"{FIGURE} shown as a loaded image (the 4x3 in figure, not an icon)", loaded_image)
    assert any("artifact" in src or src.startswith("blob:") for src, _, _ in images), images
    drv.save_screenshot(str(shots / "3_artifact_png.png"))
    print(f"screenshots: {shots}")
