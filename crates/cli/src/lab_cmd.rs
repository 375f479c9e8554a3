//! `flashdoc lab`: list and run experiments.

use anyhow::Result;
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct LabArgs {
    #[command(subcommand)]
    command: LabCommand,
}

#[derive(clap::Subcommand)]
enum LabCommand {
    /// List the built-in experiments.
    List,
    /// Run (or resume) an experiment and write results.csv/json, plots and report.md/html.
    Run {
        /// A built-in experiment name or an experiment YAML file.
        experiment: String,
        /// tiny | quick | medium | paper (default: the experiment's own).
        #[arg(long)]
        scale: Option<String>,
        /// Output directory (finished points there are skipped).
        #[arg(long, default_value = "results/lab")]
        out: PathBuf,
        /// No progress bar.
        #[arg(long)]
        quiet: bool,
        /// Set the headline beside an earlier run's (a directory with results.json, e.g.
        /// docs/results/streams).
        #[arg(long)]
        compare: Option<PathBuf>,
    },
    /// Write a finished run's report and plots again from its results.json (after the
    /// report's code changed); runs nothing.
    Report {
        /// The run's directory (with results.json), e.g. docs/results/streams-reference.
        dir: PathBuf,
        /// Set the headline beside an earlier run's (a directory with results.json).
        #[arg(long)]
        compare: Option<PathBuf>,
    },
    /// Print an experiment as YAML (a starting point for your own).
    Show { experiment: String },
}

pub fn run(args: LabArgs) -> Result<()> {
    match args.command {
        LabCommand::List => {
            for e in lab::experiment::builtins() {
                println!("{:<16} {:<8} {}", e.name, e.scale, e.title);
            }
            Ok(())
        }
        LabCommand::Report { dir, compare } => {
            let report = lab::rewrite_report(&dir, compare.as_deref())?;
            println!("report: {}", report.display());
            Ok(())
        }
        LabCommand::Show { experiment } => {
            print!(
                "{}",
                serde_yaml::to_string(&lab::load_experiment(&experiment)?)?
            );
            Ok(())
        }
        LabCommand::Run {
            experiment,
            scale,
            out,
            quiet,
            compare,
        } => {
            let exp = lab::load_experiment(&experiment)?;
            let out = out.join(&exp.name);
            let started = std::time::Instant::now();
            let report =
                lab::run_experiment(exp, scale.as_deref(), &out, quiet, compare.as_deref())?;
            eprintln!("done in {:.0} s", started.elapsed().as_secs_f64());
            println!("report: {}", report.display());
            Ok(())
        }
    }
}
