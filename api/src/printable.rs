//! Text from outside (ids, titles, actors, a server's message) shown inside a one-line message.
//!
//! [`printable`] writes control characters (newlines, carriage returns, the escape that starts a
//! terminal control sequence) and the invisible bidirectional overrides as Rust's `escape_debug`
//! spells them (`\n`, `\u{1b}`, `\u{202e}`), and every other character as it is. An error that
//! quotes a user's id thus stays one line and cannot recolour, move or rewrite the terminal.
//!
//! [`hex`] writes bytes (hashes, names in a cursor) as hex digits, which are always printable.
//!
//! Invariant: the output holds no control character, and printing it again changes nothing.

use std::fmt::{self, Write};

/// Displays its text with the characters that could break a line or drive a terminal escaped.
#[derive(Clone, Copy, Debug)]
pub struct Printable<'a>(&'a str);

/// `bytes` as lower-case hex digits, two per byte.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

/// `text`, displayed safely inside a one-line message.
pub fn printable(text: &str) -> Printable<'_> {
    Printable(text)
}

/// Whether `character` must be escaped: a control character (C0, DEL, C1), a line or paragraph
/// separator, or a bidirectional mark, embedding, override or isolate.
fn is_unsafe(character: char) -> bool {
    character.is_control()
        || matches!(character, '\u{2028}' | '\u{2029}' | '\u{200e}' | '\u{200f}' | '\u{061c}')
        || ('\u{202a}'..='\u{202e}').contains(&character)
        || ('\u{2066}'..='\u{2069}').contains(&character)
}

impl fmt::Display for Printable<'_> {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        for character in self.0.chars() {
            if is_unsafe(character) {
                write!(formatter, "{}", character.escape_debug())?;
            } else {
                formatter.write_char(character)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_escaped_and_other_text_is_kept() {
        let shown = printable("st-1\n\x1b[31mred\r\u{202e}txt\t\u{7f}").to_string();
        assert_eq!(shown, r"st-1\n\u{1b}[31mred\r\u{202e}txt\t\u{7f}");
        assert!(!shown.chars().any(is_unsafe), "{shown}");
        assert_eq!(printable(&shown).to_string(), shown, "printing twice changes nothing");
        let plain = r#"bead "ünïcödé" 🚀 C:\path 'q'"#;
        assert_eq!(printable(plain).to_string(), plain);
    }
}
