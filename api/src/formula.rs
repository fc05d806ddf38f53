//! Formulas (docs/beads.md §7): TOML recipes of steps that are cooked into molecules.
//!
//! ```toml
//! formula = "release"
//! description = "Cut a release"
//! version = 1
//! [vars]
//! version = { description = "the version to cut", required = true }
//! channel = "stable"              # a plain string is a default value
//! [[steps]]
//! id = "build"
//! title = "Build {{version}}"
//! [[steps]]
//! id = "publish"
//! title = "Publish {{version}} to {{channel}}"
//! needs = ["build"]
//! ```
//!
//! [`Formula::parse`] checks the whole recipe: unique non-empty step ids, `needs` that name real
//! steps, no cycle, sizes within [`crate::limits`]. [`Formula::render`] substitutes `{{var}}` in
//! titles and descriptions; a variable with no value and no default is refused with the step named.
//! Everything here is pure, so the state machine parses and renders at apply time and every
//! replica gets the same molecule.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::limits::{DESCRIPTION_BYTES_MAX, FORMULA_BYTES_MAX, FORMULA_STEPS_MAX, NAME_BYTES_MAX, TITLE_BYTES_MAX};
use crate::outcome::Refusal;

/// A declared variable: a default value, or a table with a default, a description and `required`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum VarSpec {
    /// `name = "default"`.
    Default(String),
    /// `name = { default = "...", description = "...", required = true }`.
    Table {
        /// Value used when none is given.
        #[serde(default)]
        default: Option<String>,
        /// What the variable is for.
        #[serde(default)]
        description: String,
        /// Refuse to cook without a value.
        #[serde(default)]
        required: bool,
    },
}

/// One step of a formula.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Step {
    /// Unique within the formula; becomes the step bead's `ref`.
    pub id: String,
    /// Title template.
    pub title: String,
    /// Description template.
    #[serde(default)]
    pub description: String,
    /// Ids of steps that must close first.
    #[serde(default)]
    pub needs: Vec<String>,
}

/// A parsed, checked formula.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Formula {
    /// The formula's name (`formula = "..."`).
    pub formula: String,
    /// What it does.
    #[serde(default)]
    pub description: String,
    /// Its version, free-form.
    #[serde(default)]
    pub version: Option<toml::Value>,
    /// Declared variables.
    #[serde(default)]
    pub vars: BTreeMap<String, VarSpec>,
    /// The steps, in order.
    #[serde(default)]
    pub steps: Vec<Step>,
}

/// One step with its templates filled in, ready to become a bead.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RenderedStep {
    /// The step id.
    pub id: String,
    /// The title.
    pub title: String,
    /// The description.
    pub description: String,
    /// Positions (in [`Formula::steps`]) of the steps it needs.
    pub needs: Vec<usize>,
}

fn invalid(message: String) -> Refusal {
    Refusal::Invalid(message)
}

impl Formula {
    /// Parses and checks a formula's TOML source.
    pub fn parse(source: &str) -> Result<Formula, Refusal> {
        if source.len() > FORMULA_BYTES_MAX {
            return Err(Refusal::TooLarge { what: "formula".into(), size: source.len(), limit: FORMULA_BYTES_MAX });
        }
        let formula: Formula = toml::from_str(source).map_err(|error| {
            let message = error.message().trim_end().to_string();
            let place = error.span().map(|span| line_of(source, span.start)).map(|line| format!(" at line {line}"));
            invalid(format!("formula is not valid TOML{}: {message}; fix the file", place.unwrap_or_default()))
        })?;
        formula.check()?;
        Ok(formula)
    }

    fn check(&self) -> Result<(), Refusal> {
        if self.formula.trim().is_empty() || self.formula.len() > NAME_BYTES_MAX {
            return Err(invalid(format!(
                "formula name must be 1 to {NAME_BYTES_MAX} bytes; set `formula = \"name\"` at the top"
            )));
        }
        if self.steps.is_empty() {
            return Err(invalid(format!("formula {} has no [[steps]]; add at least one", self.formula)));
        }
        if self.steps.len() > FORMULA_STEPS_MAX {
            return Err(invalid(format!("formula {} has more than {FORMULA_STEPS_MAX} steps", self.formula)));
        }
        let mut ids = BTreeSet::new();
        for step in &self.steps {
            if step.id.is_empty() || step.id.len() > NAME_BYTES_MAX {
                return Err(invalid(format!("a step of formula {} has an empty or over-long id", self.formula)));
            }
            if !ids.insert(step.id.as_str()) {
                return Err(invalid(format!("step id {:?} appears twice; step ids must be unique", step.id)));
            }
        }
        for step in &self.steps {
            for need in &step.needs {
                if !ids.contains(need.as_str()) {
                    return Err(invalid(format!(
                        "step {:?} needs unknown step {need:?}; name a step of this formula",
                        step.id
                    )));
                }
            }
        }
        if let Some(step) = self.step_in_cycle() {
            return Err(invalid(format!("step {step:?} is part of a dependency cycle; remove one of its needs")));
        }
        Ok(())
    }

    fn position(&self, step_id: &str) -> usize {
        self.steps.iter().position(|step| step.id == step_id).expect("needs are checked before positions are taken")
    }

    /// A step on a cycle of `needs`, if there is one (Kahn's algorithm: what never drains is cyclic).
    fn step_in_cycle(&self) -> Option<&str> {
        let mut waiting: Vec<usize> = self.steps.iter().map(|step| step.needs.len()).collect();
        let mut ready: Vec<usize> = (0..self.steps.len()).filter(|&index| waiting[index] == 0).collect();
        let mut drained = 0;
        while let Some(done) = ready.pop() {
            drained += 1;
            for (index, step) in self.steps.iter().enumerate() {
                let count = step.needs.iter().filter(|need| **need == self.steps[done].id).count();
                if count > 0 {
                    waiting[index] -= count;
                    if waiting[index] == 0 {
                        ready.push(index);
                    }
                }
            }
        }
        if drained == self.steps.len() {
            return None;
        }
        // What never drained is on a cycle or downstream of one. Walk `needs` among those steps
        // until one repeats: that step is on the cycle itself.
        let mut current = waiting.iter().position(|&count| count > 0)?;
        let mut seen = vec![false; self.steps.len()];
        while !seen[current] {
            seen[current] = true;
            let next =
                self.steps[current].needs.iter().map(|need| self.position(need)).find(|&index| waiting[index] > 0)?;
            current = next;
        }
        Some(self.steps[current].id.as_str())
    }

    /// The steps with `{{var}}` filled in from `vars` (then the declared defaults).
    pub fn render(&self, vars: &BTreeMap<String, String>) -> Result<Vec<RenderedStep>, Refusal> {
        let mut values: BTreeMap<&str, &str> = BTreeMap::new();
        for (name, spec) in &self.vars {
            let default = match spec {
                VarSpec::Default(value) => Some(value.as_str()),
                VarSpec::Table { default, .. } => default.as_deref(),
            };
            if let Some(value) = default {
                values.insert(name, value);
            }
        }
        values.extend(vars.iter().map(|(name, value)| (name.as_str(), value.as_str())));
        for (name, spec) in &self.vars {
            if matches!(spec, VarSpec::Table { required: true, .. }) && !values.contains_key(name.as_str()) {
                let uses = |template: &str| template_names(template).any(|used| used == name.as_str());
                let user = self
                    .steps
                    .iter()
                    .find(|step| uses(&step.title) || uses(&step.description))
                    .map(|step| format!(" (step {:?} uses it)", step.id))
                    .unwrap_or_default();
                return Err(invalid(format!(
                    "formula {} needs variable {name:?}{user}; pass --var {name}=VALUE",
                    self.formula
                )));
            }
        }
        self.steps
            .iter()
            .map(|step| {
                let title = substitute(&step.title, &values, &step.id)?;
                let description = substitute(&step.description, &values, &step.id)?;
                check_rendered(&step.id, &title, &description)?;
                let needs = step.needs.iter().map(|need| self.position(need)).collect();
                Ok(RenderedStep { id: step.id.clone(), title, description, needs })
            })
            .collect()
    }
}

fn check_rendered(step_id: &str, title: &str, description: &str) -> Result<(), Refusal> {
    if title.trim().is_empty() {
        return Err(invalid(format!("step {step_id:?} renders to an empty title; give it a title")));
    }
    if title.len() > TITLE_BYTES_MAX || description.len() > DESCRIPTION_BYTES_MAX {
        return Err(invalid(format!("step {step_id:?} renders to an over-long title or description")));
    }
    Ok(())
}

/// The variable names a template uses, `{{name}}` with the spaces inside the braces trimmed, as
/// [`substitute`] reads them (an unclosed `{{` ends the list).
fn template_names(template: &str) -> impl Iterator<Item = &str> {
    let mut rest = template;
    std::iter::from_fn(move || {
        let start = rest.find("{{")?;
        let after = &rest[start + 2..];
        let end = after.find("}}")?;
        rest = &after[end + 2..];
        Some(after[..end].trim())
    })
}

/// Replaces every `{{name}}` (spaces inside the braces allowed) with its value.
fn substitute(template: &str, values: &BTreeMap<&str, &str>, step_id: &str) -> Result<String, Refusal> {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(start) = rest.find("{{") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find("}}") else {
            return Err(invalid(format!("step {step_id:?} has an unclosed {{{{ in its title or description")));
        };
        let name = after[..end].trim();
        let Some(value) = values.get(name) else {
            return Err(invalid(format!(
                "step {step_id:?} uses variable {name:?}, which has no value; pass --var {name}=VALUE"
            )));
        };
        out.push_str(value);
        rest = &after[end + 2..];
    }
    out.push_str(rest);
    Ok(out)
}

fn line_of(source: &str, offset: usize) -> usize {
    source[..offset.min(source.len())].matches('\n').count() + 1
}

/// Parses `key=value` pairs (split at the first `=`) into a map.
pub fn parse_vars(pairs: &[String]) -> Result<BTreeMap<String, String>, Refusal> {
    pairs
        .iter()
        .map(|pair| {
            pair.split_once('=')
                .filter(|(key, _)| !key.is_empty())
                .map(|(key, value)| (key.to_string(), value.to_string()))
                .ok_or_else(|| invalid(format!("variable {pair:?} is not key=value")))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const RELEASE: &str = r#"
formula = "release"
[vars]
version = { required = true }
channel = "stable"
[[steps]]
id = "build"
title = "Build {{version}}"
[[steps]]
id = "publish"
title = "Publish {{ version }} to {{channel}}"
needs = ["build"]
"#;

    #[test]
    fn renders_vars_and_defaults() {
        let formula = Formula::parse(RELEASE).expect("valid formula");
        let vars = parse_vars(&["version=1.2=3".into()]).expect("vars");
        let steps = formula.render(&vars).expect("renders");
        assert_eq!(steps[0].title, "Build 1.2=3");
        assert_eq!(steps[1].title, "Publish 1.2=3 to stable");
        assert_eq!(steps[1].needs, vec![0]);
    }

    #[test]
    fn refuses_bad_formulas_naming_the_step() {
        let cases = [
            ("formula = \"x\"\n[[steps]]\nid = \"a\"\ntitle = \"A\"\nneeds = [\"b\"]\n", "needs unknown step \"b\""),
            (
                "formula = \"x\"\n[[steps]]\nid = \"a\"\ntitle = \"A\"\nneeds = [\"b\"]\n[[steps]]\nid = \"b\"\ntitle = \"B\"\nneeds = [\"a\"]\n",
                "dependency cycle",
            ),
            (
                "formula = \"x\"\n[[steps]]\nid = \"a\"\ntitle = \"A\"\n[[steps]]\nid = \"a\"\ntitle = \"B\"\n",
                "appears twice",
            ),
            ("formula = \"x\"\n[[steps]\n", "not valid TOML at line 2"),
            ("formula = \"x\"\n", "has no [[steps]]"),
            ("formula = \"x\"\n[[steps]]\nid = \"a\"\ntitle = \"A\"\nbogus = 1\n", "not valid TOML"),
        ];
        for (source, expected) in cases {
            let error = Formula::parse(source).expect_err(source).to_string();
            assert!(error.contains(expected), "{error:?} should contain {expected:?}");
        }
    }

    #[test]
    fn refuses_missing_vars_naming_the_step() {
        let formula = Formula::parse(RELEASE).expect("valid formula");
        let error = formula.render(&BTreeMap::new()).expect_err("version is required").to_string();
        assert!(error.contains("needs variable \"version\""), "{error}");
        let undeclared =
            Formula::parse("formula = \"x\"\n[[steps]]\nid = \"a\"\ntitle = \"A {{who}}\"\n").expect("valid formula");
        let error = undeclared.render(&BTreeMap::new()).expect_err("who has no value").to_string();
        assert!(error.contains("step \"a\" uses variable \"who\""), "{error}");
    }
}
