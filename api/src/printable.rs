//! Text from outside (ids, titles, actors, descriptions, a server's message) shown to a person.
//!
//! [`printable`] writes control characters (newlines, carriage returns, the escape that starts a
//! terminal control sequence) and the invisible bidirectional overrides as Rust's `escape_debug`
//! spells them (`\n`, `\u{1b}`, `\u{202e}`), and every other character as it is. An error that
//! quotes a user's id, or a one-line field of a bead (title, actor, label, metadata), thus stays
//! one line and cannot recolour, move or rewrite the terminal.
//!
//! [`printable_block`] is the same for block text (a description, notes, a message body): it
//! keeps line feeds and tabs, indents every line after the first so that none can pass for a row
//! of the output around it, and escapes the rest.
//!
//! [`is_unsafe`] says which characters those are, for the identifiers (actors, labels, metadata
//! keys) that must hold none (`validate` names the first one an identifier holds); [`has_unsafe`]
//! whether a text holds one.
//!
//! [`hex`] writes bytes (hashes, names in a cursor) as hex digits, which are always printable.
//!
//! Invariant: the output of [`printable`] holds no unsafe character, and printing it again
//! changes nothing; the output of [`printable_block`] holds none but line feeds and tabs, and
//! each of its lines after the first is empty or starts with the indent.

use std::fmt::{self, Write};

/// Displays its text with the characters that could break a line or drive a terminal escaped.
#[derive(Clone, Copy, Debug)]
pub struct Printable<'a>(&'a str);

/// Displays block text: line feeds and tabs kept, lines after the first indented, the other
/// characters that could drive a terminal escaped.
#[derive(Clone, Copy, Debug)]
pub struct Block<'a> {
    text: &'a str,
    indent: &'a str,
}

/// `bytes` as lower-case hex digits, two per byte.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

/// `text`, displayed safely inside a one-line message.
pub fn printable(text: &str) -> Printable<'_> {
    Printable(text)
}

/// `text`, displayed safely as a block: every non-empty line after the first starts with
/// `indent`. Among rows, the indent holds at least one space, so that no line of the block can
/// pass for an unindented row; a document printed alone (a TOML source) may take `""` to keep
/// its lines as written. A `\r\n` line end is shown as a line feed; a `\r` of its own is escaped.
pub fn printable_block<'a>(text: &'a str, indent: &'a str) -> Block<'a> {
    Block { text, indent }
}

/// Whether `character` must be escaped: a control character (C0, DEL, C1), a line or paragraph
/// separator, or a bidirectional mark, embedding, override or isolate.
pub fn is_unsafe(character: char) -> bool {
    character.is_control()
        || matches!(character, '\u{2028}' | '\u{2029}' | '\u{200e}' | '\u{200f}' | '\u{061c}')
        || ('\u{202a}'..='\u{202e}').contains(&character)
        || ('\u{2066}'..='\u{2069}').contains(&character)
}

/// Whether `text` holds a character [`printable`] would escape.
pub fn has_unsafe(text: &str) -> bool {
    text.chars().any(is_unsafe)
}

/// Writes `text` with every unsafe character escaped.
fn escape_into<W: Write + ?Sized>(text: &str, out: &mut W) -> fmt::Result {
    for character in text.chars() {
        if is_unsafe(character) {
            write!(out, "{}", character.escape_debug())?;
        } else {
            out.write_char(character)?;
        }
    }
    Ok(())
}

impl fmt::Display for Printable<'_> {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        if formatter.width().is_some() || formatter.precision().is_some() {
            // A column (`{:<24}`) pads or cuts the escaped text, as it would a string.
            let mut escaped = String::with_capacity(self.0.len());
            escape_into(self.0, &mut escaped)?;
            return formatter.pad(&escaped);
        }
        escape_into(self.0, formatter)
    }
}

impl fmt::Display for Block<'_> {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The indent is written before the first character of a continuation line, not after the
        // line feed, so an empty line or the end of the text carries no trailing spaces.
        let mut line_start = false;
        let mut characters = self.text.chars().peekable();
        while let Some(character) = characters.next() {
            if character == '\n' || (character == '\r' && characters.peek() == Some(&'\n')) {
                if character == '\r' {
                    characters.next();
                }
                formatter.write_char('\n')?;
                line_start = true;
                continue;
            }
            if line_start {
                formatter.write_str(self.indent)?;
                line_start = false;
            }
            if character != '\t' && is_unsafe(character) {
                write!(formatter, "{}", character.escape_debug())?;
            } else {
                formatter.write_char(character)?;
            }
        }
        Ok(())
    }
}

/// `count` of `noun`, in the plural unless it is one: "1 bead", "2 beads".
pub fn counted(count: impl Into<u64>, noun: &str) -> String {
    let count = count.into();
    if count == 1 { format!("1 {noun}") } else { format!("{count} {noun}s") }
}

/// Words as a sentence lists them: "a", "a and b", "a, b and c".
pub fn listed(words: &[&str]) -> String {
    match words.split_last() {
        None => String::new(),
        Some((last, [])) => last.to_string(),
        Some((last, others)) => format!("{} and {last}", others.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_are_listed_as_a_sentence_lists_them() {
        assert_eq!(listed(&[]), "");
        assert_eq!(listed(&["create"]), "create");
        assert_eq!(listed(&["create", "update"]), "create and update");
        assert_eq!(listed(&["create", "update", "close"]), "create, update and close");
    }

    #[test]
    fn control_characters_are_escaped_and_other_text_is_kept() {
        let shown = printable("st-1\n\x1b[31mred\r\u{202e}txt\t\u{7f}").to_string();
        assert_eq!(shown, r"st-1\n\u{1b}[31mred\r\u{202e}txt\t\u{7f}");
        assert!(!has_unsafe(&shown), "{shown}");
        assert_eq!(printable(&shown).to_string(), shown, "printing twice changes nothing");
        let plain = r#"bead "ünïcödé" 🚀 C:\path 'q'"#;
        assert_eq!(printable(plain).to_string(), plain);
        assert!(!has_unsafe(plain));
        assert_eq!(format!("{:<6}|{:>4}", printable("a\n"), printable("b")), "a\\n   |   b", "columns pad");
    }

    #[test]
    fn a_forged_row_in_a_title_stays_on_one_line() {
        let title = "fake\nbad-1 [closed] P0 victim @root";
        let shown = printable(title).to_string();
        assert_eq!(shown, r"fake\nbad-1 [closed] P0 victim @root");
        assert_eq!(shown.lines().count(), 1);
    }

    #[test]
    fn terminal_controls_of_every_kind_are_escaped() {
        let shown = printable("a\x1b[2Jb\x07c\u{9b}31md\u{7f}e\u{202e}f\u{2066}g\u{2028}h\0").to_string();
        assert_eq!(shown, r"a\u{1b}[2Jb\u{7}c\u{9b}31md\u{7f}e\u{202e}f\u{2066}g\u{2028}h\0");
        assert!(!has_unsafe(&shown), "{shown}");
        for unsafe_character in ['\x1b', '\x07', '\u{9b}', '\u{7f}', '\u{202e}', '\n', '\t', '\r'] {
            assert!(is_unsafe(unsafe_character), "{unsafe_character:?}");
            assert!(has_unsafe(&format!("actor{unsafe_character}")), "{unsafe_character:?}");
        }
    }

    #[test]
    fn a_block_keeps_newlines_and_tabs_and_indents_continuation_lines() {
        let text = "first line\n\tsecond\x1b[31m red\n\nbad-1 [closed] P0 victim\u{202e}\r\nlast\rline\u{9b}\n";
        let shown = printable_block(text, "    ").to_string();
        assert_eq!(
            shown,
            "first line\n    \tsecond\\u{1b}[31m red\n\n    bad-1 [closed] P0 victim\\u{202e}\n    last\\rline\\u{9b}\n"
        );
        for line in shown.lines().skip(1) {
            assert!(line.is_empty() || line.starts_with("    "), "{line:?} is not indented");
        }
        assert!(!shown.chars().any(|character| character != '\n' && character != '\t' && is_unsafe(character)));
        let plain = "one line, no controls: ünïcödé 🚀";
        assert_eq!(printable_block(plain, "  ").to_string(), plain, "ordinary one-line text is unchanged");
    }
}
