//! flashdoc's lab: experiments that run workloads on the engine, replay their I/O through the
//! placement policies on the simulated SSD, and publish the results as files, plots and a
//! report beside the seeds' published numbers.
pub mod chapter10;
pub mod experiment;
pub mod hass;
pub mod hass_spec;
pub mod inplace_cow;
pub mod io_pattern;
pub mod plot;
pub mod realwt;
pub mod report;
pub mod run;
pub mod secantus;
pub mod summary;
mod tools;

use anyhow::{Context, Result};
use std::path::{Path, PathBuf};

/// Loads a built-in experiment by name, or an experiment YAML file.
pub fn load_experiment(name_or_file: &str) -> Result<experiment::Experiment> {
    if let Some(e) = experiment::find(name_or_file) {
        return Ok(e);
    }
    let p = Path::new(name_or_file);
    if p.exists() {
        let text =
            std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?;
        let e: experiment::Experiment =
            serde_yaml::from_str(&text).with_context(|| format!("in {}", p.display()))?;
        e.validate()?;
        return Ok(e);
    }
    let names: Vec<String> = experiment::builtins().into_iter().map(|e| e.name).collect();
    anyhow::bail!(
        "no experiment named '{name_or_file}' (built-in: {}; or give a YAML file)",
        names.join(", ")
    )
}

/// Runs (or resumes) an experiment into `out` and writes results, plots and the report; with
/// `compare`, the report also sets its headline beside that earlier run's (a directory with
/// `results.json`, e.g. a committed larger-scale run). Returns the path of `report.html`.
pub fn run_experiment(
    exp: experiment::Experiment,
    scale: Option<&str>,
    out: &Path,
    quiet: bool,
    compare: Option<&Path>,
) -> Result<PathBuf> {
    if exp.kind == experiment::Kind::Hass {
        let mut exp = exp;
        if let Some(s) = scale {
            exp.scale = s.to_string();
        }
        exp.validate()?;
        let scale = exp.scale.clone();
        return hass::run(&exp, &scale, out, quiet);
    }
    if exp.kind == experiment::Kind::RealWiredTiger {
        return realwt::run(exp, scale, out, quiet);
    }
    if exp.kind == experiment::Kind::InPlaceVsCow {
        return inplace_cow::run(exp, scale, out, quiet);
    }
    let reference = compare.map(load_reference).transpose()?;
    let lab = run::Lab::new(out, exp, scale, quiet)?;
    let points = lab.run_all()?;
    let runs = lab.engine_runs()?;
    run::write_results(out, &lab.exp, &lab.scale, &points, &runs)?;
    io_pattern::record(out, &lab.exp, &runs)?;
    report::write(
        out,
        &lab.exp,
        &lab.scale,
        &points,
        &runs,
        reference.as_ref(),
    )
}

/// Writes an experiment's report and plots again from the `results.json` in `dir`, without
/// running anything: for a committed run after the report's code changed (its readings are
/// computed from the points, so they follow the new code). With `compare`, the headline is set
/// beside that earlier run's, as with [`run_experiment`]. Returns the path of `report.html`.
pub fn rewrite_report(dir: &Path, compare: Option<&Path>) -> Result<PathBuf> {
    let (file, doc, points) = read_results(dir)?;
    let exp: experiment::Experiment = serde_json::from_value(doc["experiment"].clone())
        .with_context(|| format!("the experiment of {}", file.display()))?;
    if matches!(
        exp.kind,
        experiment::Kind::Hass | experiment::Kind::RealWiredTiger | experiment::Kind::InPlaceVsCow
    ) {
        anyhow::bail!(
            "{}: experiment '{}' writes its report while it runs; rerun it with `flashdoc lab run`",
            file.display(),
            exp.name
        );
    }
    let scale: experiment::ScaleSpec = serde_json::from_value(doc["scale"].clone())
        .with_context(|| format!("the scale of {}", file.display()))?;
    let runs: Vec<run::EngineRun> = serde_json::from_value(doc["engine_runs"].clone())
        .with_context(|| format!("the engine runs of {}", file.display()))?;
    anyhow::ensure!(!points.is_empty(), "{} holds no points", file.display());
    if exp.kind == experiment::Kind::IoPattern && !dir.join(io_pattern::FILE).exists() {
        // A run from before the patterns were kept: measure them once from its traces.
        io_pattern::record(dir, &exp, &runs).with_context(|| {
            format!(
                "{} has no {}, and its traces cannot give it: rerun it with `flashdoc lab run`",
                dir.display(),
                io_pattern::FILE
            )
        })?;
    }
    let reference = compare.map(load_reference).transpose()?;
    report::write(dir, &exp, &scale, &points, &runs, reference.as_ref())
}

/// A finished run's `results.json` in `dir`: its path, the whole document, and its points.
fn read_results(dir: &Path) -> Result<(PathBuf, serde_json::Value, Vec<run::Point>)> {
    let file = dir.join("results.json");
    let text = std::fs::read_to_string(&file)
        .with_context(|| format!("reading {} (a lab run's results)", file.display()))?;
    let doc: serde_json::Value =
        serde_json::from_str(&text).with_context(|| format!("parsing {}", file.display()))?;
    let points: Vec<run::Point> = serde_json::from_value(doc["points"].clone())
        .with_context(|| format!("the points of {}", file.display()))?;
    Ok((file, doc, points))
}

/// An earlier run's points, where they came from, and the experiment that made them.
pub struct Reference {
    pub dir: PathBuf,
    pub experiment: experiment::Experiment,
    pub points: Vec<run::Point>,
}

fn load_reference(dir: &Path) -> Result<Reference> {
    let (_, doc, points) =
        read_results(dir).with_context(|| format!("the run to compare with, {}", dir.display()))?;
    let experiment: experiment::Experiment = serde_json::from_value(doc["experiment"].clone())
        .with_context(|| {
            format!(
                "the experiment of the run to compare with, {}",
                dir.display()
            )
        })?;
    Ok(Reference {
        dir: dir.to_path_buf(),
        experiment,
        points,
    })
}
