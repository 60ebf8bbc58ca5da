"""`python -m submission qualify [minutes=M] [data_dir=DIR] [out=DIR] [recipes=mild,medium,hot]
[key=value ...]`: the data checked once, then the parts of plan.py one after another inside the
budget, each as its own process, and the folder of record.py written from what they measured.
Exit status: 0 when every part ran or was left out for the budget, 1 when a part failed or none
was measured, 2 for refused settings or data (nothing written), 130 (Ctrl-C) or 143 (SIGTERM) when
interrupted, the record of what was measured written."""
from __future__ import annotations

import datetime
import os
import platform
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import TextIO

from .. import score
from ..bench_profile import BenchProfile
from ..bench_profile import read as read_profile
from ..config import REPO_ROOT, ConfigError, parse_overrides
from ..data.data_json import PreparedData
from ..data.prepare import cache_folder
from ..data.synthetic_images import write_folder
from ..energy import Energy
from ..methods.declarations.ema import smoothing_per_update
from ..options import QualifyOptions
from ..preflight import resolve_here
from ..progress import evaluations, read_progress, windows
from ..report import steadiness
from ..results import read_campaign, results_root
from ..run_folder import CampaignFolder
from ..stop_signals import FirstSignal, first_signal_interrupts
from . import claim, record
from . import plan as planned

STOP_GRACE_S = 10          # a part past the budget: SIGTERM, then this long before SIGKILL
# a part qualify was interrupted in: long enough for a campaign to stop its run between two steps
# and log run_stop (a CPU step under load takes seconds)
INTERRUPT_GRACE_S = 30
# how long each recipe's bench and projection train: the shortest budgets of the ImageNet grid
# (submission/grids/imagenet.yaml), as Medium and Hot leave scale_schedule_ratio to the user
RECIPE_SETTINGS = {"medium": {"scale_schedule_ratio": "0.75"}, "hot": {"scale_schedule_ratio": "3.0"}}


def _recipes(text: str) -> tuple[str, ...]:
    chosen = tuple(r.strip() for r in text.split(",") if r.strip())
    unknown = [r for r in chosen if r not in planned.RECIPES]
    if unknown or not chosen:
        raise ConfigError(f"recipes={text}: qualify profiles {', '.join(planned.RECIPES)} (a comma-separated "
                          "list of them)")
    return chosen


def _commit() -> str:
    try:
        found = subprocess.run(["git", "-C", str(REPO_ROOT), "describe", "--always", "--dirty"],
                               capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return "unknown (git not found)"
    return found.stdout.strip() or "unknown (not a git checkout)"


def _words(settings: dict[str, str]) -> list[str]:
    return [f"{k}={v}" for k, v in settings.items()]


class Qualify:
    """One qualification: its settings, its budget, its folders, and the parts' outcomes."""

    def __init__(self, options: QualifyOptions, overrides: dict[str, str]):
        self.began = time.monotonic()
        # results_dir places the record (under results_dir/qualify/, as out= does); the parts
        # never get it: the short campaign runs in qualify's scratch folder, not among a user's results
        self.overrides = {k: v for k, v in overrides.items() if k != "results_dir"}
        given_data = overrides.get("data_dir", "")
        if given_data and not Path(given_data).is_dir():
            raise ConfigError(f"data_dir={given_data} is not a folder: give an ImageNet-format folder "
                              "(train/<class>/, val/<class>/), or leave data_dir out for qualify's own")
        # the synthetic folder is made later: any folder lets the settings resolve
        probe = resolve_here(None, {**overrides, "dataset": "imagenet", "data_dir": given_data or "."})
        self.device_type = probe.device_type
        self.scale = planned.SCALES[self.device_type]
        self.minutes = options.minutes or planned.DEFAULT_MINUTES[self.device_type]
        self.recipes = _recipes(options.recipes)
        self.system_name = probe.system_name
        self.scratch = cache_folder(probe) / "qualify" / self.system_name
        stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
        self.out = claim.record_folder(options.out, results_root(probe).qualify(self.system_name, stamp))
        self.data_dir = Path(given_data) if given_data else self.scratch / "data"
        self.common = {**self.scale.settings, "dataset": "imagenet", "data_dir": str(self.data_dir),
                       "cache_dir": str(self.scratch / "cache"), **overrides}
        self.estimates = planned.Estimates(self.scale)
        self.outcomes: list[record.PartOutcome] = []
        self.measured: dict[str, Path] = {}     # part key -> its profile, or the campaign's folder

    def left_s(self) -> float:
        return self.minutes * 60 - (time.monotonic() - self.began)

    def say(self, line: str) -> None:
        print(f"[qualify] {line}", flush=True)

    # ---- the data -----------------------------------------------------------------
    def make_data(self) -> str:
        shape = self.scale.data
        if "data_dir" in self.overrides:
            return f"{self.data_dir} (given)"
        marker = self.data_dir / ".complete"
        if marker.is_file() and marker.read_text() == shape.describe():
            self.say(f"reusing {self.data_dir}: {shape.describe()}")
        else:
            self.say(f"writing {shape.describe()} to {self.data_dir}")
            shutil.rmtree(self.data_dir, ignore_errors=True)
            write_folder(self.data_dir, shape)
            marker.write_text(shape.describe())
        return f"{shape.describe()} (made by qualify: submission/data/synthetic_images.py)"

    def check_data(self) -> None:
        """Prepare the data every part reads, once, before any part: images that cannot go
        through the pipeline are refused here (a ConfigError naming them and
        skip_bad_images=true) rather than by each part in turn; the parts reuse the .beton files."""
        from ..data.prepare import prepare
        prepare(resolve_here(None, self.recipe_settings(self.recipes[0])))

    def recipe_settings(self, recipe: str) -> dict[str, str]:
        """qualify's settings for a part of `recipe`: the scale's and the run length the
        recipe leaves to the user (RECIPE_SETTINGS)."""
        return {**self.common, **RECIPE_SETTINGS.get(recipe, {}), "recipe": recipe}

    # ---- the parts ------------------------------------------------------------------
    def argv(self, part: planned.Part) -> list[str]:
        settings = self.recipe_settings(part.recipe)
        if part.verb == "run":
            settings = {**settings, **self.scale.campaign,
                        "results_dir": str(self.scratch / "campaign"), **self.overrides}
            return ["run", *_words(settings)]
        if part.compiled:
            settings.update(compile="true", cuda_graphs=str(part.cuda_graphs).lower())
        return ["bench", *_words(settings), "quick=true", f"steps={self.scale.steps}", "rounds=1",
                f"json={self.scratch / 'profiles' / (part.key + '.json')}"]

    def run_part(self, part: planned.Part, log: TextIO) -> record.PartOutcome:
        argv = self.argv(part)
        command = "python -m submission " + " ".join(argv)
        estimate = self.estimates.of(part)
        left = self.left_s()
        if not planned.fits(estimate, left):
            self.say(f"left out: {part.name} (estimated {estimate:.0f} s, {max(left, 0):.0f} s of the "
                     "budget left)")
            return record.PartOutcome(part.name, command, record.LEFT_OUT, estimate,
                                      note=f"estimated {estimate:.0f} s, {max(left, 0):.0f} s left")
        self.say(f"{part.name}: estimated {estimate:.0f} s, {left:.0f} s of the budget left")
        if part.verb == "run":
            shutil.rmtree(self.scratch / "campaign", ignore_errors=True)
        else:
            (self.scratch / "profiles").mkdir(parents=True, exist_ok=True)
            (self.scratch / "profiles" / f"{part.key}.json").unlink(missing_ok=True)
        log.write(f"\n===== {part.name}: {command}\n")
        log.flush()
        began = time.monotonic()
        rc, stopped = run_until(argv, log, deadline=began + left - planned.RECORD_RESERVE_S - STOP_GRACE_S)
        seconds = time.monotonic() - began
        outcome = self.judge(part, command, estimate, seconds, rc, stopped)
        if outcome.status in (record.DONE, record.STOPPED):     # a stopped part's: what it needs at least
            self.estimates.learn(part, seconds)
        self.say(f"{part.name}: {outcome.status} in {seconds:.0f} s" + (f" ({outcome.note})" if outcome.note else ""))
        return outcome

    def judge(self, part: planned.Part, command: str, estimate: float, seconds: float, rc: int,
              stopped: bool) -> record.PartOutcome:
        if part.verb == "run":
            folders = [d for d in (self.scratch / "campaign").glob("*/") if CampaignFolder(d).result_files()]
            finished = folders and len(CampaignFolder(folders[0]).result_files()) == int(self.scale.campaign["runs"])
            if finished:
                self.measured[part.key] = folders[0]
                # rc 1: no run reached its target, which none is meant to (plan._CAMPAIGN)
                return record.PartOutcome(part.name, command, record.DONE, estimate, seconds)
            status, note = (record.STOPPED, "") if stopped else (record.FAILED, f"exit code {rc}, "
                                                                 "no complete run: qualify.log says why")
            return record.PartOutcome(part.name, command, status, estimate, seconds, note)
        profile = self.scratch / "profiles" / f"{part.key}.json"
        if rc == 0 and profile.is_file():
            self.measured[part.key] = profile
            return record.PartOutcome(part.name, command, record.DONE, estimate, seconds)
        if stopped:
            return record.PartOutcome(part.name, command, record.STOPPED, estimate, seconds)
        return record.PartOutcome(part.name, command, record.FAILED, estimate, seconds,
                                  f"exit code {rc}: qualify.log says why")

    def run_parts(self, log: TextIO, stop: FirstSignal) -> None:
        """Every part of the plan in turn; a stop signal stops the part running (INTERRUPTED)
        and the parts after it are not run."""
        for part in planned.parts(self.device_type, self.recipes):
            if stop.signum:
                self.outcomes.append(record.PartOutcome(part.name, "", record.NOT_RUN, self.estimates.of(part),
                                                        note=f"interrupted by {_said(stop.name)}"))
                continue
            try:
                self.outcomes.append(self.run_part(part, log))
            except KeyboardInterrupt:
                self.outcomes.append(record.PartOutcome(part.name, "", record.INTERRUPTED, self.estimates.of(part),
                                                        note=f"by {_said(stop.name)}"))

    # ---- the record --------------------------------------------------------------------
    def recipe_figures(self) -> list[record.RecipeFigures]:
        found = []
        for recipe in self.recipes:
            path = self.measured.get(recipe)
            if path is None:
                continue
            profile = read_profile(path)
            shutil.copyfile(path, self.out / record.profile_name(recipe))
            side = profile.settings["train_resolution"]
            power = profile.power
            watts = power.watts if power else None
            step_img_per_s = profile.step_img_per_s
            assert step_img_per_s is not None       # qualify's bench times the step
            if power is None:
                power_note = "not measured: the profile holds no power figures"
            elif watts is not None and power.source is not None:
                power_note = power.source
            else:
                power_note = f"not measured: {power.not_measured}"
            found.append(record.RecipeFigures(
                recipe, record.profile_name(recipe), side, step_img_per_s,
                profile.eval_img_per_s, profile.loader.img_per_s, (profile.mfu or {}).get("mfu"),
                watts, getattr(power, "idle_watts", None) if power else None, power_note,
                self.project_command(recipe, recipe), loader_figures(profile)))
        return found

    def project_command(self, recipe: str, key: str) -> str:
        """`project` of the profile `key` in the record, with the settings it was measured with."""
        settings = {k: v for k, v in self.recipe_settings(recipe).items() if k not in ("data_dir", "cache_dir")}
        return " ".join(["python -m submission project", *_words(settings),
                         f"profile={self.out / record.profile_name(key)}"])

    def compiled_figures(self) -> list[record.CompiledFigures]:
        found = []
        for key, path in self.measured.items():
            if "-compiled" not in key:
                continue
            profile = read_profile(path)
            recipe = profile.settings["recipe"]
            shutil.copyfile(path, self.out / record.profile_name(key))   # projects beside the eager one
            compiled = dict(profile.compiled or {})
            changes = compiled.pop("side_changes", {})
            found.append(record.CompiledFigures(
                recipe, bool(profile.settings.get("cuda_graphs")),
                {side: {k: v[k] for k in ("img_per_s", "eager_img_per_s", "first_step_s")}
                 for side, v in compiled.items()},
                {change: v["lost_s"] for change, v in changes.items()},
                record.profile_name(key), self.project_command(recipe, key)))
        return found

    def campaign_figures(self) -> record.CampaignFigures | None:
        folder = self.measured.get("campaign")
        if folder is None:
            return None
        for recipe in self.recipes:          # the report's bench section shows the profiles
            if (self.out / record.profile_name(recipe)).is_file():
                shutil.copyfile(self.out / record.profile_name(recipe), folder / record.profile_name(recipe))
        from ..report.campaign_report import write_report
        shutil.copyfile(write_report(folder), self.out / record.REPORT)
        summary = score.summarize(folder)
        runs_steady = {r.run: r for r in steadiness.campaign_steadiness(folder)}
        runs, checks = [], []
        campaign = CampaignFolder(folder)
        for result, run in zip(campaign.result_files(), summary.runs):
            steady = runs_steady.get(result.stem)
            used = score.run_energy_of(result)
            runs.append(record.CampaignRun(
                result.stem, run.status + (f" ({run.reason})" if run.reason else ""), run.minutes,
                used.joules, steady.first_window_ratio if steady else None,
                steady.first_eval_ratio if steady else None,
                [vars(c) for c in (steady.side_changes or [])] if steady else [],
                *_learning(campaign.progress_of(result))))
            checks.append(self.energy_check(result.stem, used))
        classes = PreparedData.load(campaign.data).num_classes
        learned, verdict = record.verdict(runs, classes)
        return record.CampaignFigures(str(folder), runs, summary.campaign_kwh, summary.energy_note,
                                      "; ".join(dict.fromkeys(checks)), classes,
                                      self.ema_words(folder, max((r.steps for r in runs), default=0)), learned,
                                      verdict)

    def ema_words(self, folder: Path, steps: int) -> str:
        """How the campaign in `folder` scaled the EMA its evaluations score, against the recipe's own."""
        ran = read_campaign(folder)
        settings = ran.settings if ran is not None else self.scale.campaign
        half_life, every = float(settings["ema_half_life_batches"]), int(settings["ema_update_every_batches"])
        own = resolve_here(None, self.recipe_settings(self.recipes[0]))

        def kept(half_life: float, every: int) -> float:    # of the initial weights, after `steps`
            return smoothing_per_update(half_life, every) ** (steps // every)
        return (f"The EMA the evaluations score is scaled to the campaign's length, as submission/embedded.yaml "
                f"scales it: half-life {half_life:g} batches, an update every "
                f"{'batch' if every == 1 else f'{every} batches'}; after a run's {steps} "
                f"steps it holds {kept(half_life, every):.1%} of the initial weights (the recipe's half-life "
                f"{own.ema_half_life_batches:g}, every {own.ema_update_every_batches}, made for its full run, "
                f"would hold {kept(own.ema_half_life_batches, own.ema_update_every_batches):.0%}).")

    def energy_check(self, run: str, used: Energy) -> str:
        """The run's joules against idle power x time and the power limit x time."""
        if not used.measured:
            return f"not measured ({used.not_measured})"
        assert used.joules is not None          # measured
        mild = self.measured.get(self.recipes[0])
        power = read_profile(mild).power if mild else None
        idle = getattr(power, "idle_watts", None) if power else None
        low = idle * used.seconds if idle else None
        high = used.power_limit_watts * used.seconds if used.power_limit_watts else None
        within = (low is None or used.joules >= low) and (high is None or used.joules <= high)
        return (f"{run}: {used.joules / 1000:.3g} kJ over {used.seconds:.0f} s, "
                f"{'within' if within else 'OUTSIDE'} [{_kj(low)}, {_kj(high)}] kJ "
                f"(idle {idle or 0:.0f} W x time, power limit {used.power_limit_watts or 0:.0f} W x time)")

    def write_record(self, data: str, interrupted: str = "") -> tuple[Path, record.Qualification]:
        """qualify.json and qualify.md from what the parts measured; `interrupted`: the stop
        signal that ended the parts early, as a user knows it."""
        import torch

        from ..system_json import fill_from_host
        filled = fill_from_host({"host_processor_model_name": "", "host_processor_vcpu_count": ""})
        host = (f"{filled['host_processor_model_name'] or platform.machine()}, "
                f"{filled['host_processor_vcpu_count'] or os.cpu_count()} vCPUs")
        device = (torch.cuda.get_device_name(0) if self.device_type == "cuda" else f"CPU ({host})")
        q = record.Qualification(
            device, self.device_type, host,
            datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), _commit(),
            torch.__version__, self.minutes, (time.monotonic() - self.began) / 60, data,
            {k: v for k, v in self.common.items() if k not in ("data_dir", "cache_dir")}, self.outcomes,
            self.recipe_figures(), self.compiled_figures(), self.campaign_figures(), interrupted)
        return record.write(self.out, q), q


def loader_figures(profile: BenchProfile) -> list[record.LoaderFigures]:
    """The profile's loaders: the run's, then the one measured beside it."""
    measured = [(profile.loader, profile.fed_step_by_side, profile.eval_img_per_s)]
    if profile.loader_beside is not None:
        beside = profile.loader_beside
        measured.append((beside.loader, beside.fed_step_by_side, beside.eval_img_per_s))
    return [record.LoaderFigures(
        loader.kind, loader.img_per_s, loader.threads,
        {str(side): v.fed_img_per_s / v.synthetic_img_per_s for side, v in fed.items()}, eval_rate,
        None if loader.device_memory_bytes is None else loader.device_memory_bytes / 2**20)
        for loader, fed, eval_rate in measured]


def _learning(progress: Path | None) -> tuple[float | None, float | None, int, int]:
    """A campaign run's top-1 at its first and last evaluation, its evaluations and its steps."""
    records = read_progress(progress) if progress is not None and progress.is_file() else []
    evals = [r["accuracy"] for r in evaluations(records)]
    steps = max((r["total_steps"] for r in windows(records)), default=0)
    return (evals[0] if evals else None), (evals[-1] if evals else None), len(evals), steps


def _kj(joules: float | None) -> str:
    return "?" if joules is None else f"{joules / 1000:.3g}"


def run_until(argv: list[str], log: TextIO, deadline: float) -> tuple[int, bool]:
    """`python -m submission ARGV` with its output to the console (indented) and `log`;
    stopped (SIGTERM to its process group, SIGKILL after STOP_GRACE_S) at `deadline`.
    Returns (exit code, whether it was stopped)."""
    job = subprocess.Popen([sys.executable, "-m", "submission", *argv], cwd=REPO_ROOT, text=True,
                           bufsize=1, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           start_new_session=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    console = threading.Event()
    console.set()

    def relay() -> None:
        assert job.stdout is not None     # a pipe
        for line in job.stdout:
            if console.is_set():
                sys.stdout.write("    " + line)
                sys.stdout.flush()
            log.write(line)
            log.flush()
    thread = threading.Thread(target=relay, daemon=True)
    thread.start()
    stopped = False
    try:
        while job.poll() is None:
            if time.monotonic() > deadline and not stopped:
                stopped = True
                _signal(job, signal.SIGTERM)
                deadline = time.monotonic() + STOP_GRACE_S
            elif stopped and time.monotonic() > deadline:
                _signal(job, signal.SIGKILL)
            time.sleep(0.2)
    except KeyboardInterrupt:
        # the part's last lines go to the log only: a campaign's "re-run the same command to
        # resume" is not for qualify's user (qualify redoes its campaign)
        console.clear()
        _signal(job, signal.SIGTERM)
        try:
            job.wait(INTERRUPT_GRACE_S)
        except subprocess.TimeoutExpired:
            _signal(job, signal.SIGKILL)
        raise
    finally:
        thread.join(5)
    return job.returncode, stopped


def _signal(job: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(job.pid, sig)
    except ProcessLookupError:
        pass


def main(options: QualifyOptions, words: list[str]) -> int:
    overrides = parse_overrides(words)
    q = Qualify(options, overrides)
    with claim.scratch_held(q.scratch):
        return _qualify(q)


def _qualify(q: Qualify) -> int:
    q.say(f"{q.device_type} scale, budget {q.minutes:g} min; the record goes to {q.out}")
    with first_signal_interrupts() as stop:
        try:
            data = q.make_data()
            q.check_data()
        except KeyboardInterrupt:
            q.say(f"interrupted by {_said(stop.name)} before any part ran: nothing measured, nothing recorded")
            return stop.exit_status
        with claim.open_log(q.out) as log:
            q.run_parts(log, stop)
        stop.hold()           # the record is written whole whatever arrives now
        path, written = q.write_record(data, _said(stop.name) if stop.signum else "")
    q.say(record.closing_line(written, path))
    if stop.signum:
        return stop.exit_status
    measured = any(o.status == record.DONE for o in q.outcomes)
    return 0 if measured and not any(o.status == record.FAILED for o in q.outcomes) else 1


def _said(signal_name: str) -> str:
    """A stop signal as a user knows it: Ctrl-C, or the signal's name."""
    return "Ctrl-C" if signal_name == "SIGINT" else signal_name
