//! `strand mail`: messages between agents (docs/beads.md §7). A message is a bead of type `message`
//! addressed through its assignee, sent by the actor, labelled `gc:message` and `thread:<id>`,
//! where the thread id is the id of the thread's first message. Reading adds `read` (the message
//! stays open); archiving closes it. Text output escapes what agents wrote (`api::printable`):
//! a body keeps its lines, each after the first indented, so none can pass for a header.

use api::command::{Command, MailSend, Query};
use api::commands::get::Get;
use api::commands::inbox::Inbox;
use api::model::{Bead, BeadId, LABEL_READ, MESSAGE_TYPE, THREAD_LABEL_PREFIX};
use api::printable::{printable, printable_block};
use clap::Subcommand;

use crate::answers::beads_of;
use crate::output::{BLOCK_INDENT, print_bead, print_beads};
use crate::{Cli, CommandResult, Failure};

/// How many messages `mail inbox` shows by default.
const INBOX_LIMIT_DEFAULT: u32 = 50;

#[derive(Subcommand, Debug)]
pub enum MailCommand {
    /// Send a message from the actor.
    Send {
        /// The recipient.
        #[arg(long)]
        to: String,
        /// The subject; default: the body's first line, cut to 80 characters.
        #[arg(long, default_value = "")]
        subject: String,
        /// The body.
        body: String,
    },
    /// Open messages for an agent, newest first; unread ones only unless --all.
    Inbox {
        /// The recipient; default: the actor.
        #[arg(long)]
        agent: Option<String>,
        /// Include messages already read.
        #[arg(long)]
        all: bool,
        /// At most N (0: unlimited).
        #[arg(long, default_value_t = INBOX_LIMIT_DEFAULT)]
        limit: u32,
    },
    /// Mark a message read and print it.
    Read {
        /// The message.
        id: String,
    },
    /// Mark a message unread.
    Unread {
        /// The message.
        id: String,
    },
    /// Archive (close) a message; archiving it twice is refused.
    Archive {
        /// The message.
        id: String,
    },
    /// Reply to a message: to its sender, in its thread.
    Reply {
        /// The message replied to.
        id: String,
        /// The body.
        body: String,
        /// The subject; default: the body's first line.
        #[arg(long, default_value = "")]
        subject: String,
    },
    /// Every message of a thread, oldest first; ID is any message of the thread.
    Thread {
        /// A message of the thread.
        id: String,
    },
}

/// Runs a `mail` command.
pub async fn run(cli: &Cli, command: &MailCommand) -> CommandResult {
    let client = cli.client()?;
    let json = cli.json;
    let write = |command: Command| async { client.execute(command).await.map_err(Failure::from) };
    match command {
        MailCommand::Send { to, subject, body } => {
            let mail = MailSend { to: to.clone(), subject: subject.clone(), body: body.clone(), reply_to: None };
            let sent = one(write(Command::MailSend(mail)).await?)?;
            print_or(&sent, json, || format!("sent {} to {}", printable(sent.id.as_str()), printable(&sent.assignee)));
        }
        MailCommand::Reply { id, body, subject } => {
            let mail = MailSend {
                to: String::new(),
                subject: subject.clone(),
                body: body.clone(),
                reply_to: Some(BeadId::from(id.as_str())),
            };
            let sent = one(write(Command::MailSend(mail)).await?)?;
            print_or(&sent, json, || {
                let (sent_id, to) = (printable(sent.id.as_str()), printable(&sent.assignee));
                format!("sent {sent_id} to {to} (reply to {})", printable(id))
            });
        }
        MailCommand::Inbox { agent, all, limit } => {
            let recipient = agent.clone().unwrap_or_else(|| cli.actor());
            let query = Query::from(Inbox { recipient, include_read: *all, limit: *limit });
            print_messages(&beads_of(client.query(query).await?), json);
        }
        MailCommand::Read { id } => {
            let message =
                one(write(Command::MailMark(api::command::MailMark { id: BeadId::from(id.as_str()), read: true }))
                    .await?)?;
            if json {
                print_bead(&message, true);
            } else {
                print_message(&message);
            }
        }
        MailCommand::Unread { id } => {
            let message =
                one(write(Command::MailMark(api::command::MailMark { id: BeadId::from(id.as_str()), read: false }))
                    .await?)?;
            print_or(&message, json, || format!("marked {} unread", printable(message.id.as_str())));
        }
        MailCommand::Archive { id } => {
            let message =
                one(write(Command::MailArchive(api::command::MailArchive { id: BeadId::from(id.as_str()) })).await?)?;
            print_or(&message, json, || format!("archived {}", printable(message.id.as_str())));
        }
        MailCommand::Thread { id } => {
            let message = one(client.query(Query::from(Get { ids: vec![BeadId::from(id.as_str())] })).await?)?;
            if message.bead_type != MESSAGE_TYPE {
                return Err(Failure::Refused(format!("bead {id} is a {}, not a message", message.bead_type)));
            }
            let thread = thread_of(&message);
            let messages = beads_of(client.query(api::commands::thread::Thread { thread }.into()).await?);
            if json {
                print_beads(&messages, true);
            } else {
                messages.iter().for_each(print_message);
            }
        }
    }
    Ok(true)
}

/// The one bead of an answer.
fn one(answer: api::outcome::Outcome) -> Result<Bead, Failure> {
    crate::answers::one_bead(answer, "message")
}

/// The bead as JSON, or the text line `text` makes.
fn print_or(bead: &Bead, json: bool, text: impl FnOnce() -> String) {
    if json {
        print_bead(bead, true);
    } else {
        println!("{}", text());
    }
}

/// The thread a message belongs to: its `thread:` label, else its own id (it starts one).
fn thread_of(message: &Bead) -> String {
    message
        .labels
        .iter()
        .find_map(|label| label.strip_prefix(THREAD_LABEL_PREFIX))
        .unwrap_or(message.id.as_str())
        .to_string()
}

/// `id  from -> to  subject`, with `*` before unread messages.
fn message_line(message: &Bead) -> String {
    let unread = if message.labels.contains(LABEL_READ) { ' ' } else { '*' };
    format!(
        "{unread} {}  {} -> {}  {}",
        printable(message.id.as_str()),
        printable(&message.from),
        printable(&message.assignee),
        printable(&message.title)
    )
}

fn print_messages(messages: &[Bead], json: bool) {
    if json {
        print_beads(messages, true);
        return;
    }
    for message in messages {
        println!("{}", message_line(message));
    }
}

/// A whole message: headers, a blank line, the body (its lines after the first indented).
fn print_message(message: &Bead) {
    println!("{} (thread {})", printable(message.id.as_str()), printable(&thread_of(message)));
    println!("From: {}", printable(&message.from));
    println!("To: {}", printable(&message.assignee));
    println!("Date: {}", message.created_at.to_rfc3339());
    println!("Subject: {}", printable(&message.title));
    println!();
    println!("{}", printable_block(&message.description, BLOCK_INDENT));
}
