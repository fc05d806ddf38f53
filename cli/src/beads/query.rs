//! `strand query EXPRESSION`: bd's query language over the namespace's beads, as Gas City's
//! bd store and default work queries send it (`ephemeral=true AND status=open`).
//!
//! An expression is comparisons (`field OP value`, OP one of `= != < <= > >=`) joined by `AND`,
//! `OR` and `NOT` (any case; NOT binds tightest, then AND, then OR) and grouped by parentheses.
//! Values are words, numbers, quoted strings, or durations (`7d`: that long ago). The equality
//! tests of the top-level conjunction that an index serves (status, assignee, type, label,
//! parent) go to the cluster; the whole expression is then checked on each bead here. Closed beads
//! are left out unless `--all` is given or the expression mentions `status`, as in bd.

use std::collections::BTreeMap;

use api::command::{ListFilter, Query as ClusterQuery};
use api::commands::get::Lookup;
use api::model::{Bead, BeadId, Status};
use clap::Args;

use crate::answers::beads_of;
use crate::beads::listing::{LIST_LIMIT_DEFAULT, Listing, LocalFilter, SortOrder};
use crate::output::print_with_counts;
use crate::values::{parse_priority, parse_time};
use crate::{Cli, CommandResult, Failure};

/// `strand query`.
#[derive(Args, Debug)]
pub struct QueryArgs {
    /// The expression, e.g. `ephemeral=true AND status=open` (several words are joined by spaces).
    #[arg(required = true, value_name = "EXPRESSION")]
    words: Vec<String>,
    /// At most this many (0: every match).
    #[arg(long, short = 'n', default_value_t = LIST_LIMIT_DEFAULT)]
    limit: u32,
    /// Include closed beads.
    #[arg(long, short = 'a')]
    all: bool,
    /// Sort by this field (bd's names); default: priority, then newest.
    #[arg(long, default_value = "")]
    sort: String,
    /// Reverse the order.
    #[arg(long, short = 'r')]
    reverse: bool,
    /// Print the parsed expression and stop (no cluster needed).
    #[arg(long)]
    parse_only: bool,
    /// Longer text output (accepted; the text output is one line per bead).
    #[arg(long, hide = true)]
    long: bool,
}

/// The fields an expression may compare.
const FIELDS: [&str; 22] = [
    "id",
    "status",
    "type",
    "assignee",
    "label",
    "labels",
    "parent",
    "priority",
    "title",
    "description",
    "desc",
    "notes",
    "ephemeral",
    "no_history",
    "pinned",
    "template",
    "created",
    "updated",
    "closed",
    "started",
    "has_metadata_key",
    "metadata.<key>",
];

/// A comparison operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

impl Op {
    fn as_str(self) -> &'static str {
        match self {
            Op::Eq => "=",
            Op::Ne => "!=",
            Op::Lt => "<",
            Op::Le => "<=",
            Op::Gt => ">",
            Op::Ge => ">=",
        }
    }

    fn holds(self, ordering: std::cmp::Ordering) -> bool {
        use std::cmp::Ordering::{Equal, Greater, Less};
        match self {
            Op::Eq => ordering == Equal,
            Op::Ne => ordering != Equal,
            Op::Lt => ordering == Less,
            Op::Le => ordering != Greater,
            Op::Gt => ordering == Greater,
            Op::Ge => ordering != Less,
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
enum Token {
    Word(String),
    Quoted(String),
    Op(Op),
    Open,
    Close,
    And,
    Or,
    Not,
}

fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() || matches!(c, '_' | '-' | '.' | ':' | '+' | '*' | '/' | '@')
}

fn lex(text: &str) -> Result<Vec<Token>, String> {
    let mut tokens = Vec::new();
    let mut chars = text.chars().peekable();
    while let Some(&c) = chars.peek() {
        if c.is_whitespace() {
            chars.next();
            continue;
        }
        let token = match c {
            '(' | ')' => {
                chars.next();
                if c == '(' { Token::Open } else { Token::Close }
            }
            '=' | '!' | '<' | '>' => {
                chars.next();
                let equals = chars.next_if_eq(&'=').is_some();
                match (c, equals) {
                    ('=', _) => Token::Op(Op::Eq),
                    ('!', true) => Token::Op(Op::Ne),
                    ('!', false) => return Err("'!' must be followed by '=' (use NOT to negate)".into()),
                    ('<', true) => Token::Op(Op::Le),
                    ('<', false) => Token::Op(Op::Lt),
                    ('>', true) => Token::Op(Op::Ge),
                    _ => Token::Op(Op::Gt),
                }
            }
            '"' | '\'' => {
                chars.next();
                let mut value = String::new();
                loop {
                    match chars.next() {
                        None => return Err(format!("unterminated string starting with {c}")),
                        Some(end) if end == c => break,
                        Some('\\') => match chars.next() {
                            Some('n') => value.push('\n'),
                            Some('t') => value.push('\t'),
                            Some(other) => value.push(other),
                            None => return Err("a string ends in a lone backslash".into()),
                        },
                        Some(other) => value.push(other),
                    }
                }
                Token::Quoted(value)
            }
            c if is_word_char(c) => {
                let mut word = String::new();
                while let Some(next) = chars.next_if(|next| is_word_char(*next)) {
                    word.push(next);
                }
                match word.to_ascii_uppercase().as_str() {
                    "AND" => Token::And,
                    "OR" => Token::Or,
                    "NOT" => Token::Not,
                    _ => Token::Word(word),
                }
            }
            other => return Err(format!("unexpected character {other:?}")),
        };
        tokens.push(token);
    }
    Ok(tokens)
}

/// A parsed expression.
#[derive(Clone, Debug, PartialEq)]
enum Expr {
    Or(Vec<Expr>),
    And(Vec<Expr>),
    Not(Box<Expr>),
    Compare { field: String, op: Op, value: String },
}

impl std::fmt::Display for Expr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let joined = |f: &mut std::fmt::Formatter<'_>, parts: &[Expr], word: &str| {
            let texts: Vec<String> = parts.iter().map(Expr::to_string).collect();
            write!(f, "({})", texts.join(&format!(" {word} ")))
        };
        match self {
            Expr::Or(parts) => joined(f, parts, "OR"),
            Expr::And(parts) => joined(f, parts, "AND"),
            Expr::Not(inner) => write!(f, "NOT {inner}"),
            Expr::Compare { field, op, value } => write!(f, "{field}{}{value}", op.as_str()),
        }
    }
}

struct Parser {
    tokens: Vec<Token>,
    position: usize,
}

impl Parser {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.position)
    }

    fn next(&mut self) -> Option<Token> {
        let token = self.tokens.get(self.position).cloned();
        self.position += 1;
        token
    }

    /// Operands joined by `joiner`: one operand as itself, several as `combine` of them.
    fn joined(
        &mut self,
        joiner: Token,
        operand: fn(&mut Parser) -> Result<Expr, String>,
        combine: fn(Vec<Expr>) -> Expr,
    ) -> Result<Expr, String> {
        let mut parts = vec![operand(self)?];
        while self.peek() == Some(&joiner) {
            self.next();
            parts.push(operand(self)?);
        }
        Ok(if parts.len() == 1 { parts.remove(0) } else { combine(parts) })
    }

    fn or(&mut self) -> Result<Expr, String> {
        self.joined(Token::Or, Parser::and, Expr::Or)
    }

    fn and(&mut self) -> Result<Expr, String> {
        self.joined(Token::And, Parser::not, Expr::And)
    }

    fn not(&mut self) -> Result<Expr, String> {
        if self.peek() == Some(&Token::Not) {
            self.next();
            return Ok(Expr::Not(Box::new(self.not()?)));
        }
        self.primary()
    }

    fn primary(&mut self) -> Result<Expr, String> {
        match self.next() {
            Some(Token::Open) => {
                let inner = self.or()?;
                match self.next() {
                    Some(Token::Close) => Ok(inner),
                    _ => Err("a '(' is not closed".into()),
                }
            }
            Some(Token::Word(field)) => {
                let field = field.to_lowercase();
                let known = FIELDS.contains(&field.as_str()) || field.starts_with("metadata.");
                if !known {
                    return Err(format!("unknown field {field:?}; fields: {}", FIELDS.join(", ")));
                }
                let Some(Token::Op(op)) = self.next() else {
                    return Err(format!("{field} must be followed by one of = != < <= > >="));
                };
                match self.next() {
                    Some(Token::Word(value) | Token::Quoted(value)) => Ok(Expr::Compare { field, op, value }),
                    _ => Err(format!("{field}{} needs a value", op.as_str())),
                }
            }
            Some(other) => Err(format!("expected a comparison such as status=open, found {other:?}")),
            None => Err("the expression ends where a comparison is expected".into()),
        }
    }
}

fn parse(text: &str) -> Result<Expr, String> {
    let mut parser = Parser { tokens: lex(text)?, position: 0 };
    let expr = parser.or()?;
    if let Some(token) = parser.peek() {
        return Err(format!("unexpected {token:?} after a complete expression (join comparisons with AND or OR)"));
    }
    Ok(expr)
}

fn parse_bool(value: &str) -> Result<bool, String> {
    match value.to_ascii_lowercase().as_str() {
        "true" | "yes" | "1" => Ok(true),
        "false" | "no" | "0" => Ok(false),
        other => Err(format!("{other:?} is not true or false")),
    }
}

/// A time value: a duration (`7d`, `24h`, `2w`: that long before now), or what `--created-after` takes.
fn parse_when(value: &str) -> Result<i64, String> {
    let is_duration = value.len() > 1
        && value[..value.len() - 1].chars().all(|c| c.is_ascii_digit())
        && value.ends_with(['h', 'd', 'w']);
    parse_time(&if is_duration { format!("-{value}") } else { value.to_string() })
}

/// An expression checked once: its values parsed, so evaluation cannot fail.
#[derive(Debug)]
enum Check {
    Or(Vec<Check>),
    And(Vec<Check>),
    Not(Box<Check>),
    Text { field: Text, op: Op, value: String },
    Number { field: Number, op: Op, value: i64 },
    Flag { field: Flag, op: Op, value: bool },
    Label { op: Op, value: String },
    Metadata { key: String, op: Op, value: String },
    HasMetadataKey { op: Op, key: String },
}

#[derive(Clone, Copy, Debug)]
enum Text {
    Id,
    Status,
    Type,
    Assignee,
    Parent,
    Title,
    Description,
    Notes,
}

#[derive(Clone, Copy, Debug)]
enum Number {
    Priority,
    Created,
    Updated,
    Closed,
    Started,
}

#[derive(Clone, Copy, Debug)]
enum Flag {
    Ephemeral,
    NoHistory,
    Pinned,
    Template,
}

fn only_equality(field: &str, op: Op) -> Result<(), String> {
    if matches!(op, Op::Eq | Op::Ne) { Ok(()) } else { Err(format!("{field} compares with = or != only")) }
}

fn check_of(expr: &Expr) -> Result<Check, String> {
    let all = |parts: &[Expr]| parts.iter().map(check_of).collect::<Result<Vec<_>, _>>();
    let Expr::Compare { field, op, value } = expr else {
        return Ok(match expr {
            Expr::Or(parts) => Check::Or(all(parts)?),
            Expr::And(parts) => Check::And(all(parts)?),
            Expr::Not(inner) => Check::Not(Box::new(check_of(inner)?)),
            Expr::Compare { .. } => unreachable!("matched above"),
        });
    };
    let (op, value) = (*op, value.clone());
    let text = |field| -> Result<Check, String> { Ok(Check::Text { field, op, value: value.clone() }) };
    let time = |field| -> Result<Check, String> { Ok(Check::Number { field, op, value: parse_when(&value)? }) };
    let flag = |field| -> Result<Check, String> {
        only_equality(&format!("{field:?}").to_lowercase(), op)?;
        Ok(Check::Flag { field, op, value: parse_bool(&value)? })
    };
    match field.as_str() {
        "id" => text(Text::Id),
        "status" => {
            only_equality(field, op)?;
            Status::parse(&value).ok_or_else(|| format!("invalid status {value:?}"))?;
            text(Text::Status)
        }
        "type" => text(Text::Type),
        "assignee" => text(Text::Assignee),
        "parent" => text(Text::Parent),
        "title" => text(Text::Title),
        "description" | "desc" => text(Text::Description),
        "notes" => text(Text::Notes),
        "label" | "labels" => {
            only_equality(field, op)?;
            Ok(Check::Label { op, value })
        }
        "priority" => Ok(Check::Number { field: Number::Priority, op, value: i64::from(parse_priority(&value)?) }),
        "created" => time(Number::Created),
        "updated" => time(Number::Updated),
        "closed" => time(Number::Closed),
        "started" => time(Number::Started),
        "ephemeral" => flag(Flag::Ephemeral),
        "no_history" => flag(Flag::NoHistory),
        "pinned" => flag(Flag::Pinned),
        "template" => flag(Flag::Template),
        "has_metadata_key" => {
            only_equality(field, op)?;
            Ok(Check::HasMetadataKey { op, key: value })
        }
        other => {
            let key = other.strip_prefix("metadata.").filter(|key| !key.is_empty());
            let key = key.ok_or_else(|| format!("unknown field {other:?}"))?;
            only_equality(other, op)?;
            Ok(Check::Metadata { key: key.to_string(), op, value })
        }
    }
}

/// Text fields compare as bd compares them: title, description and notes by substring (`=`
/// contains, `!=` does not), an id ending in `*` by prefix, the rest exactly.
fn text_holds(field: Text, op: Op, value: &str, bead: &Bead) -> bool {
    let parent = bead.parent_id.as_ref().map(|id| id.0.as_str()).unwrap_or_default();
    let actual = match field {
        Text::Id => bead.id.0.as_str(),
        Text::Status => bead.status.as_str(),
        Text::Type => bead.bead_type.as_str(),
        Text::Assignee => bead.assignee.as_str(),
        Text::Parent => parent,
        Text::Title => bead.title.as_str(),
        Text::Description => bead.description.as_str(),
        Text::Notes => bead.notes.as_str(),
    };
    let wanted = match field {
        Text::Assignee | Text::Parent if matches!(value, "none" | "null") => "",
        _ => value,
    };
    let substring = matches!(field, Text::Title | Text::Description | Text::Notes);
    if substring && matches!(op, Op::Eq | Op::Ne) {
        let found = actual.to_lowercase().contains(&wanted.to_lowercase());
        return found == (op == Op::Eq);
    }
    if let (Text::Id, Some(prefix)) = (field, wanted.strip_suffix('*'))
        && matches!(op, Op::Eq | Op::Ne)
    {
        return actual.starts_with(prefix) == (op == Op::Eq);
    }
    op.holds(actual.cmp(wanted))
}

impl Check {
    fn holds(&self, bead: &Bead) -> bool {
        match self {
            Check::Or(parts) => parts.iter().any(|part| part.holds(bead)),
            Check::And(parts) => parts.iter().all(|part| part.holds(bead)),
            Check::Not(inner) => !inner.holds(bead),
            Check::Text { field, op, value } => text_holds(*field, *op, value, bead),
            Check::Number { field, op, value } => {
                let actual = match field {
                    Number::Priority => bead.priority.map(i64::from),
                    Number::Created => Some(bead.created_at.0),
                    Number::Updated => Some(bead.updated_at.0),
                    Number::Closed => bead.closed_at.map(|time| time.0),
                    Number::Started => bead.started_at.map(|time| time.0),
                };
                // A bead without the value (no priority, never closed) matches no comparison.
                actual.is_some_and(|actual| op.holds(actual.cmp(value)))
            }
            Check::Flag { field, op, value } => {
                let actual = match field {
                    Flag::Ephemeral => bead.ephemeral,
                    Flag::NoHistory => bead.no_history,
                    Flag::Pinned => bead.status == Status::Pinned,
                    Flag::Template => bead.labels.contains("template"),
                };
                (actual == *value) == (*op == Op::Eq)
            }
            Check::Label { op, value } => {
                let found = if value == "none" { bead.labels.is_empty() } else { bead.labels.contains(value) };
                found == (*op == Op::Eq)
            }
            Check::Metadata { key, op, value } => (bead.metadata.get(key) == Some(value)) == (*op == Op::Eq),
            Check::HasMetadataKey { op, key } => bead.metadata.contains_key(key) == (*op == Op::Eq),
        }
    }

    /// Whether a comparison of `status` appears anywhere.
    fn mentions_status(&self) -> bool {
        match self {
            Check::Or(parts) | Check::And(parts) => parts.iter().any(Check::mentions_status),
            Check::Not(inner) => inner.mentions_status(),
            Check::Text { field: Text::Status, .. } => true,
            _ => false,
        }
    }

    /// The id an `id=X` (no wildcard) of the top-level conjunction names.
    fn exact_id(&self) -> Option<&str> {
        self.conjuncts().into_iter().find_map(|conjunct| match conjunct {
            Check::Text { field: Text::Id, op: Op::Eq, value } if !value.ends_with('*') => Some(value.as_str()),
            _ => None,
        })
    }

    /// The equality tests of the top-level conjunction, which every match satisfies.
    fn conjuncts(&self) -> Vec<&Check> {
        match self {
            Check::And(parts) => parts.iter().flat_map(Check::conjuncts).collect(),
            other => vec![other],
        }
    }
}

/// What the cluster can filter: the indexed equalities every match must satisfy.
fn cluster_filter(check: &Check, include_closed: bool) -> ListFilter {
    let mut filter = ListFilter { all: true, ..ListFilter::default() };
    for conjunct in check.conjuncts() {
        match conjunct {
            Check::Text { field, op: Op::Eq, value } => match field {
                Text::Status => filter.statuses = Status::parse(value).into_iter().collect(),
                Text::Assignee if !matches!(value.as_str(), "none" | "null" | "") => {
                    filter.assignee = Some(value.clone());
                }
                Text::Type => filter.bead_type = Some(value.clone()),
                Text::Parent if !matches!(value.as_str(), "none" | "null" | "") => {
                    filter.parent = Some(BeadId(value.clone()));
                }
                _ => {}
            },
            Check::Label { op: Op::Eq, value } if value != "none" => filter.labels_all.push(value.clone()),
            Check::Metadata { key, op: Op::Eq, value } => filter.metadata_equals.push((key.clone(), value.clone())),
            _ => {}
        }
    }
    if filter.statuses.is_empty() && !include_closed {
        filter.statuses = Status::ALL.iter().copied().filter(|status| *status != Status::Closed).collect();
    }
    filter
}

/// Runs `strand query`.
pub async fn run(cli: &Cli, args: &QueryArgs) -> CommandResult {
    let text = args.words.join(" ");
    let usage = |reason: String| Failure::Usage(format!("query {text:?}: {reason}"));
    let expr = parse(&text).map_err(usage)?;
    if args.parse_only {
        println!("Parsed query: {}", api::printable::printable(&expr.to_string()));
        return Ok(true);
    }
    let check = check_of(&expr).map_err(usage)?;
    let include_closed = args.all || check.mentions_status();
    let listing = Listing {
        filter: cluster_filter(&check, include_closed),
        local: LocalFilter::default(),
        sort: SortOrder::parse(&args.sort, args.reverse)?,
        offset: 0,
        limit: 0,
    };
    let client = cli.client()?;
    // `id=X` in the conjunction (Gas City's look-up of one wisp) is one read, not a listing.
    let found = match check.exact_id() {
        Some(id) => beads_of(client.query(ClusterQuery::from(Lookup { ids: vec![BeadId::from(id)] })).await?),
        None => listing.run(&client).await?,
    };
    let closed_hidden = |bead: &Bead| !include_closed && bead.status == Status::Closed;
    let mut beads: Vec<Bead> = found.into_iter().filter(|bead| !closed_hidden(bead) && check.holds(bead)).collect();
    if args.limit > 0 {
        beads.truncate(args.limit as usize);
    }
    if cli.json {
        print_matches(&client, &beads).await
    } else {
        if beads.is_empty() {
            println!("No issues found matching query: {}", api::printable::printable(&text));
        } else {
            println!("Found {} issues:", beads.len());
        }
        print_with_counts(&beads, false);
        Ok(true)
    }
}

/// Prints the matches as `list --json` does, each dependency row also carrying the status of
/// the bead it points at (`status`), so a reader can tell an open blocker from a closed one.
async fn print_matches(client: &api::client::Client, beads: &[Bead]) -> CommandResult {
    let targets: Vec<BeadId> = beads.iter().flat_map(|bead| bead.depends_on.keys().cloned()).collect();
    let mut statuses: BTreeMap<BeadId, Status> = BTreeMap::new();
    for chunk in targets.chunks(api::limits::IDS_PER_REQUEST_MAX) {
        let found = beads_of(client.query(ClusterQuery::from(Lookup { ids: chunk.to_vec() })).await?);
        statuses.extend(found.into_iter().map(|bead| (bead.id, bead.status)));
    }
    let values: Vec<serde_json::Value> = crate::output::with_counts(beads)
        .into_iter()
        .map(|mut value| {
            if let Some(rows) = value.get_mut("dependencies").and_then(serde_json::Value::as_array_mut) {
                for row in rows {
                    let target = row["depends_on_id"].as_str().map(BeadId::from);
                    if let Some(status) = target.and_then(|target| statuses.get(&target)) {
                        row["status"] = status.as_str().into();
                    }
                }
            }
            value
        })
        .collect();
    crate::output::print_value(&values);
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use api::model::Timestamp;

    #[test]
    fn precedence_is_not_then_and_then_or() {
        let expr = parse("ephemeral=true AND status=open OR NOT label=x").expect("parses");
        assert_eq!(expr.to_string(), "((ephemeral=true AND status=open) OR NOT label=x)");
        assert_eq!(
            parse("(a=1 or b=2) and c=3").map(|e| e.to_string()).unwrap_err(),
            format!("unknown field \"a\"; fields: {}", FIELDS.join(", "))
        );
        let grouped = parse("(status=open or status=closed) and type=task").expect("parses");
        assert_eq!(grouped.to_string(), "((status=open OR status=closed) AND type=task)");
    }

    #[test]
    fn bad_expressions_say_what_is_wrong() {
        for (text, expected) in [
            ("", "ends where a comparison"),
            ("status", "must be followed by"),
            ("status=", "needs a value"),
            ("status=open status=closed", "join comparisons"),
            ("(status=open", "not closed"),
            ("title=\"open", "unterminated"),
            ("status!open", "'!' must be followed"),
        ] {
            let error = parse(text).expect_err(text);
            assert!(error.contains(expected), "{text}: {error}");
        }
        for (text, expected) in [
            ("status=shipped", "invalid status"),
            ("priority=high", "invalid priority"),
            ("ephemeral=maybe", "not true or false"),
            ("label>x", "= or != only"),
            ("created>yesterday-ish", "invalid time"),
        ] {
            let error = check_of(&parse(text).expect(text)).expect_err(text);
            assert!(error.contains(expected), "{text}: {error}");
        }
    }

    fn bead(id: &str) -> Bead {
        Bead {
            id: BeadId::from(id),
            seq: 1,
            title: "Fix the parser".into(),
            description: String::new(),
            notes: String::new(),
            status: Status::Open,
            bead_type: "task".into(),
            priority: Some(2),
            assignee: String::new(),
            from: String::new(),
            parent_id: None,
            reference: String::new(),
            labels: ["pool:workers".to_string()].into(),
            metadata: [("gc.routed_to".to_string(), "workers".to_string())].into(),
            ephemeral: true,
            no_history: false,
            created_at: Timestamp(1_000),
            updated_at: Timestamp(1_000),
            revision: 1,
            started_at: None,
            closed_at: None,
            close_reason: None,
            defer_until: None,
            depends_on: BTreeMap::new(),
            lease: None,
            delivery_count: 0,
            counts: Default::default(),
        }
    }

    fn matches(text: &str, bead: &Bead) -> bool {
        check_of(&parse(text).expect(text)).expect(text).holds(bead)
    }

    #[test]
    fn comparisons_follow_bd() {
        let wisp = bead("gc-7");
        for (text, expected) in [
            ("ephemeral=true AND status=open", true),
            ("ephemeral=false", false),
            ("ephemeral!=false", true),
            ("label=pool:workers", true),
            ("label=none", false),
            ("NOT label=pool:workers", false),
            ("assignee=none", true),
            ("parent=none", true),
            ("id=gc-7", true),
            ("id=\"gc-*\"", true),
            ("id=other-*", false),
            ("title=parser", true),
            ("title!=PARSER", false),
            ("priority<=2 AND priority>1", true),
            ("priority<2", false),
            ("metadata.gc.routed_to=workers", true),
            ("has_metadata_key=gc.routed_to", true),
            ("closed>7d", false),
            ("created<1d", true),
            ("status=closed OR type=task", true),
        ] {
            assert_eq!(matches(text, &wisp), expected, "{text}");
        }
    }

    #[test]
    fn the_top_level_equalities_go_to_the_cluster() {
        let check = check_of(&parse("ephemeral=true AND status=in_progress AND assignee=w1 AND label=x").expect("ok"))
            .expect("ok");
        let filter = cluster_filter(&check, true);
        assert_eq!(filter.statuses, vec![Status::InProgress]);
        assert_eq!(filter.assignee.as_deref(), Some("w1"));
        assert_eq!(filter.labels_all, vec!["x".to_string()]);
        let either = check_of(&parse("status=open OR assignee=w1").expect("ok")).expect("ok");
        assert!(cluster_filter(&either, false).assignee.is_none(), "a disjunct filters nothing by itself");
        let open_only = cluster_filter(&check_of(&parse("ephemeral=true").expect("ok")).expect("ok"), false);
        assert!(!open_only.statuses.contains(&Status::Closed));
        let one = check_of(&parse("ephemeral=true AND id=gc-7").expect("ok")).expect("ok");
        assert_eq!(one.exact_id(), Some("gc-7"), "one id is a look-up");
        assert_eq!(check_of(&parse("id=\"gc-*\"").expect("ok")).expect("ok").exact_id(), None);
    }
}
