//! `strand formula` and `strand mol`. A formula is a TOML recipe of steps (docs/beads.md §7), checked
//! by [`Formula::parse`] (locally for `formula validate`, by the cluster for everything else).
//! Cooking it makes a molecule: a root bead (`type=molecule`) and one child per step, created in
//! one atomic command. `mol status` shows the current step (the first not-closed step whose
//! needs are all closed) and closed/total; `mol current` and `mol progress` are bd's views
//! ([`crate::work::molecule_progress`]).

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use api::command::{Command, Cook, FormulaSource, Query};
use api::commands::children::Children;
use api::commands::formula_get::FormulaGet;
use api::commands::formula_list::FormulaList;
use api::formula::{Formula, parse_vars};
use api::limits::FORMULA_BYTES_MAX;
use api::model::BeadId;
use api::outcome::{FormulaInfo, Outcome};
use api::printable::{printable, printable_block};
use clap::{Args, Subcommand};
use serde::Serialize;

use crate::answers::{beads_of, unexpected};
use crate::output::{BeadJson, print_progress, print_value};
use crate::{Cli, CommandResult, Failure};

#[derive(Subcommand, Debug)]
pub enum FormulaCommand {
    /// Check a formula file locally (no cluster) and print its steps; exit 1 naming what is wrong.
    Validate {
        /// The TOML file.
        file: PathBuf,
    },
    /// Store a formula file in the namespace under its `formula = "..."` name (replacing it).
    Put {
        /// The TOML file.
        file: PathBuf,
    },
    /// List the stored formulas.
    List,
    /// Print a stored formula's TOML source (JSON: name, description, steps [{id, title,
    /// description, needs}], step_count, source).
    Show {
        /// Its name.
        name: String,
    },
    /// Remove a stored formula.
    Delete {
        /// Its name.
        name: String,
    },
}

/// `--var key=value` pairs as a map.
pub fn vars(pairs: &[String]) -> Result<BTreeMap<String, String>, Failure> {
    parse_vars(pairs).map_err(|refusal| Failure::Usage(format!("{refusal}; write it as --var key=value")))
}

/// Reads a formula file, refusing one over [`FORMULA_BYTES_MAX`] without reading all of it.
pub fn read_formula_file(path: &Path) -> Result<String, Failure> {
    read_source_file(path, "formula", FORMULA_BYTES_MAX)
}

/// Reads a TOML source (a formula's, an order's) of at most `limit` bytes.
pub fn read_source_file(path: &Path, what: &str, limit: usize) -> Result<String, Failure> {
    let cannot = |error: std::io::Error| Failure::Refused(format!("cannot read {}: {error}", path.display()));
    let file = std::fs::File::open(path).map_err(cannot)?;
    let mut source = String::new();
    file.take(limit as u64 + 1).read_to_string(&mut source).map_err(cannot)?;
    if source.len() > limit {
        return Err(Failure::Refused(format!(
            "{} is over the {what} size limit of {limit} bytes; split the {what}",
            path.display()
        )));
    }
    Ok(source)
}

/// A formula argument: an existing file is sent inline, anything else names a stored formula.
pub fn formula_source(argument: &str) -> Result<FormulaSource, Failure> {
    let path = Path::new(argument);
    if path.is_file() {
        return Ok(FormulaSource::Inline(read_formula_file(path)?));
    }
    Ok(FormulaSource::Named(argument.to_string()))
}

/// A step of a formula as `formula validate --json` prints it.
#[derive(Serialize)]
struct StepJson<'a> {
    id: &'a str,
    title: &'a str,
    needs: &'a [String],
}

fn print_formula_steps(formula: &Formula, json: bool) {
    if json {
        let steps: Vec<StepJson> = formula
            .steps
            .iter()
            .map(|step| StepJson { id: &step.id, title: &step.title, needs: &step.needs })
            .collect();
        let value = serde_json::json!({
            "name": formula.formula,
            "description": formula.description,
            "steps": steps,
        });
        print_value(&value);
        return;
    }
    let steps = crate::output::counted(formula.steps.len() as u64, "step");
    println!("formula {} is valid: {steps}", printable(&formula.formula));
    for (index, step) in formula.steps.iter().enumerate() {
        let needs = match step.needs.as_slice() {
            [] => String::new(),
            needs => format!(" (needs {})", printable(&needs.join(", "))),
        };
        println!("  {:>3}. {}: {}{needs}", index + 1, printable(&step.id), printable(&step.title));
    }
}

/// Runs a `formula` command.
pub async fn run_formula(cli: &Cli, command: &FormulaCommand) -> CommandResult {
    if let FormulaCommand::Validate { file } = command {
        let source = read_formula_file(file)?;
        let formula =
            Formula::parse(&source).map_err(|refusal| Failure::Refused(format!("{}: {refusal}", file.display())))?;
        print_formula_steps(&formula, cli.json);
        return Ok(true);
    }
    let client = cli.client()?;
    let answer = match command {
        FormulaCommand::Validate { .. } => unreachable!("answered above"),
        FormulaCommand::Put { file } => {
            client.execute(Command::FormulaPut(api::command::FormulaPut { source: read_formula_file(file)? })).await?
        }
        FormulaCommand::List => client.query(FormulaList.into()).await?,
        FormulaCommand::Show { name } => client.query(FormulaGet { name: name.clone() }.into()).await?,
        FormulaCommand::Delete { name } => {
            client.execute(Command::FormulaDelete(api::command::FormulaDelete { name: name.clone() })).await?;
            if !cli.json {
                println!("deleted formula {}", printable(name));
            }
            return Ok(true);
        }
    };
    let Outcome::Formulas(formulas) = answer else { return Err(unexpected(&answer)) };
    print_formulas(command, &formulas, cli.json);
    Ok(true)
}

fn print_formulas(command: &FormulaCommand, formulas: &[FormulaInfo], json: bool) {
    match command {
        FormulaCommand::List if json => print_value(&formulas),
        // As bd shows a formula: its steps themselves, which agents read the descriptions of.
        FormulaCommand::Show { .. } if json => {
            let Some(formula) = formulas.first() else { return print_value(&serde_json::Value::Null) };
            let steps = Formula::parse(&formula.source).map(|parsed| parsed.steps).unwrap_or_default();
            print_value(&serde_json::json!({
                "name": formula.name,
                "description": formula.description,
                "steps": steps,
                "step_count": formula.steps,
                "source": formula.source,
            }));
        }
        FormulaCommand::List => {
            for formula in formulas {
                println!(
                    "{}  {}  {}",
                    printable(&formula.name),
                    crate::output::counted(formula.steps, "step"),
                    printable(&formula.description)
                );
            }
        }
        _ if json => print_value(&formulas.first()),
        // The source is a document of its own, printed alone: its lines stay as written (not
        // indented, so it can be saved and put again), with terminal controls escaped.
        FormulaCommand::Show { .. } => {
            for formula in formulas {
                print!("{}", printable_block(&formula.source, ""));
                if !formula.source.ends_with('\n') {
                    println!();
                }
            }
        }
        _ => {
            for formula in formulas {
                let steps = crate::output::counted(formula.steps, "step");
                println!("stored formula {} ({steps})", printable(&formula.name));
            }
        }
    }
}

#[derive(Subcommand, Debug)]
pub enum MolCommand {
    /// Cook a formula into a molecule and print its root id (JSON: {root, steps}).
    Cook(CookArgs),
    /// A molecule's progress: the current step, closed/total, each step's state
    /// (JSON: {root, steps, current, closed, total}).
    Status {
        /// The molecule's root bead.
        root: String,
    },
    /// bd's `mol current`: where the agent stands in its molecules, step by step
    /// (JSON: an array of {molecule_id, molecule_title, current_step, next_step, steps, completed, total}).
    Current(crate::work::molecule_progress::CurrentArgs),
    /// bd's `mol wisp`: cook a formula as a wisp; `--root-only` makes the root alone
    /// (JSON: {new_epic_id, root_only}).
    Wisp {
        /// A formula file, or the name of a stored formula.
        formula: String,
        /// Create only the root bead.
        #[arg(long)]
        root_only: bool,
        /// The root's title; default: the formula's name.
        #[arg(long)]
        title: Option<String>,
        /// A formula variable, key=value (repeatable).
        #[arg(long = "var", value_name = "KEY=VALUE")]
        vars: Vec<String>,
    },
    /// Delete a molecule (a wisp, say): its root and every step, in one transaction (without
    /// --force, print what would go).
    Burn {
        /// The molecule's root bead.
        root: String,
        /// Really delete.
        #[arg(long, short)]
        force: bool,
    },
    /// bd's `mol progress`: closed/total of one molecule
    /// (JSON: {molecule_id, molecule_title, total, completed, in_progress, current_step_id, percent}).
    Progress(crate::work::molecule_progress::ProgressArgs),
}

#[derive(Args, Debug)]
pub struct CookArgs {
    /// A formula file (sent as is), or the name of a stored formula.
    formula: String,
    /// The root's title; default: the formula's name.
    #[arg(long)]
    title: Option<String>,
    /// A formula variable, key=value (repeatable).
    #[arg(long = "var", value_name = "KEY=VALUE")]
    vars: Vec<String>,
    /// Cook a wisp: every bead ephemeral (left out of `ready`, removed by `purge` once closed).
    #[arg(long)]
    wisp: bool,
}

/// Runs a `mol` command.
pub async fn run(cli: &Cli, command: &MolCommand) -> CommandResult {
    match command {
        MolCommand::Cook(args) => cook(cli, args).await,
        MolCommand::Current(args) => crate::work::molecule_progress::run_current(cli, args).await,
        MolCommand::Burn { root, force } => burn(cli, root, *force).await,
        MolCommand::Wisp { formula, root_only, title, vars: pairs } => {
            wisp(cli, formula, *root_only, title.clone(), pairs).await
        }
        MolCommand::Progress(args) => crate::work::molecule_progress::run_progress(cli, args).await,
        MolCommand::Status { root } => {
            let answer = cli
                .client()?
                .query(api::commands::mol_status::MolStatus { root: BeadId::from(root.as_str()) }.into())
                .await?;
            let Outcome::Progress(progress) = answer else { return Err(unexpected(&answer)) };
            print_progress(&progress, "steps", cli.json);
            Ok(true)
        }
    }
}

/// `mol wisp`: a wisp cooked whole, or its root alone (the formula and its variables are checked
/// either way).
async fn wisp(cli: &Cli, formula: &str, root_only: bool, title: Option<String>, pairs: &[String]) -> CommandResult {
    let client = cli.client()?;
    let source = formula_source(formula)?;
    let root = if root_only {
        let text = match &source {
            FormulaSource::Inline(text) => text.clone(),
            FormulaSource::Named(name) => {
                let answer = client.query(FormulaGet { name: name.clone() }.into()).await?;
                let Outcome::Formulas(mut found) = answer else { return Err(unexpected(&answer)) };
                found.pop().map(|info| info.source).unwrap_or_default()
            }
        };
        let parsed = Formula::parse(&text).map_err(|refusal| Failure::Refused(format!("{formula}: {refusal}")))?;
        // The variables are checked as a cook checks them (a missing required one is refused).
        parsed.render(&vars(pairs)?).map_err(|refusal| Failure::Refused(format!("{formula}: {refusal}")))?;
        let create = api::command::CreateBead {
            title: title.unwrap_or_else(|| parsed.formula.clone()),
            description: parsed.description.clone(),
            bead_type: api::model::MOLECULE_TYPE.to_string(),
            reference: parsed.formula.clone(),
            ephemeral: true,
            ..api::command::CreateBead::default()
        };
        crate::answers::one_bead(client.execute(Command::Create(create)).await?, "molecule root")?
    } else {
        let cook = Cook { formula: source, title, vars: vars(pairs)?, ephemeral: true };
        crate::answers::one_bead(client.execute(Command::MolCook(cook)).await?, "molecule root")?
    };
    if cli.json {
        print_value(&serde_json::json!({ "new_epic_id": root.id.0, "root_only": root_only, "schema_version": 1 }));
    } else {
        println!("{}", printable(root.id.as_str()));
    }
    Ok(true)
}

/// Deletes a molecule's steps and root in one transaction.
async fn burn(cli: &Cli, root: &str, force: bool) -> CommandResult {
    let client = cli.client()?;
    let root = BeadId::from(root);
    // Every descendant, deepest last; deleted deepest first.
    let mut ids: Vec<BeadId> = vec![root.clone()];
    let mut next = 0;
    while next < ids.len() && ids.len() <= api::limits::TXN_WRITES_MAX {
        let parent = ids[next].clone();
        next += 1;
        let children = beads_of(client.query(Query::from(Children { parent, include_closed: true })).await?);
        ids.extend(children.into_iter().map(|child| child.id));
    }
    ids.reverse();
    if ids.len() > api::limits::TXN_WRITES_MAX {
        return Err(Failure::Refused(format!(
            "molecule {root} has {} beads, more than one transaction deletes ({}); delete some steps first",
            ids.len(),
            api::limits::TXN_WRITES_MAX
        )));
    }
    if !force {
        println!(
            "would delete molecule {} and its {}; run again with --force",
            printable(root.as_str()),
            crate::output::counted((ids.len() - 1) as u64, "step")
        );
        return Ok(true);
    }
    let writes = ids.iter().map(|id| Command::Delete(api::command::Delete { id: id.clone() })).collect();
    client.execute(Command::Txn(api::command::Txn { conditions: Vec::new(), fences: Vec::new(), writes })).await?;
    if cli.json {
        print_value(&serde_json::json!({ "burned": root.0, "deleted_count": ids.len(), "schema_version": 1 }));
    } else {
        let deleted = crate::output::counted(ids.len() as u64, "bead");
        println!("burned molecule {}: {deleted} deleted", printable(root.as_str()));
    }
    Ok(true)
}

async fn cook(cli: &Cli, args: &CookArgs) -> CommandResult {
    let cook = Cook {
        formula: formula_source(&args.formula)?,
        title: args.title.clone(),
        vars: vars(&args.vars)?,
        ephemeral: args.wisp,
    };
    let answer = cli.client()?.execute(Command::MolCook(cook)).await?;
    let beads = beads_of(answer);
    let Some((root, steps)) = beads.split_first() else {
        return Err(Failure::Refused("the cluster answered the cook with no bead; check `strand events`".into()));
    };
    if cli.json {
        let steps: Vec<BeadJson> = steps.iter().map(BeadJson::from).collect();
        print_value(&serde_json::json!({ "root": BeadJson::from(root), "steps": steps }));
    } else {
        println!("{}", printable(root.id.as_str()));
    }
    Ok(true)
}
