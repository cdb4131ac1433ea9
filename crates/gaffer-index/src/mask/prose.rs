//! A person's words masked with a task's table: the request, and the messages people
//! send a masked role while it works.

use std::path::Path;

use super::{is_placeholder, Kind, Masker};
use crate::lang::Lang;

impl Masker {
    /// A person's request, masked with what this table knows: code in backticks word by
    /// word, quoted text as a string, paths segment by segment, and any word that is an
    /// identifier already masked, looks like code (`snake_case`, `camelCase`, digits) or
    /// like a placeholder. Plain English stays readable.
    pub fn mask_prose(&mut self, text: &str) -> String {
        let mut out = String::with_capacity(text.len());
        let mut rest = text;
        while !rest.is_empty() {
            let next = rest.find(['`', '"']);
            let Some(i) = next else {
                out.push_str(&self.mask_plain(rest));
                break;
            };
            out.push_str(&self.mask_plain(&rest[..i]));
            let quote = &rest[i..i + 1];
            let after = &rest[i + 1..];
            match after.find(quote) {
                Some(j) if quote == "`" => {
                    out.push('`');
                    out.push_str(&self.mask_words(&after[..j]));
                    out.push('`');
                    rest = &after[j + 1..];
                }
                Some(j) => {
                    let content = &after[..j];
                    out.push('"');
                    if !content.is_empty() {
                        out.push_str(&self.placeholder(Kind::Str, content));
                    }
                    out.push('"');
                    rest = &after[j + 1..];
                }
                None => {
                    out.push_str(quote);
                    rest = after;
                }
            }
        }
        out
    }

    /// Prose outside quotes: a string of the source quoted without its quotes, paths
    /// (`a/b.py`, `x.rs`) and code-shaped or known words.
    fn mask_plain(&mut self, text: &str) -> String {
        if let Some((at, original, placeholder)) = self.known_string_in(text) {
            let before = self.mask_plain(&text[..at]);
            let after = self.mask_plain(&text[at + original.len()..]);
            return format!("{before}{placeholder}{after}");
        }
        // Whitespace-separated pieces, the separators kept exactly.
        let mut out = String::with_capacity(text.len());
        let mut start = 0;
        for (i, c) in text
            .char_indices()
            .chain(std::iter::once((text.len(), ' ')))
        {
            if c.is_whitespace() || i == text.len() {
                let piece = &text[start..i];
                out.push_str(&self.mask_piece(piece));
                if i < text.len() {
                    out.push(c);
                }
                start = i + c.len_utf8();
            }
        }
        out
    }

    /// The first string literal this table masked (of 3 characters or more: shorter
    /// ones are ordinary words) that `text` holds as a whole (not inside a longer word),
    /// the longest where two start together: where, the literal, its placeholder.
    fn known_string_in(&self, text: &str) -> Option<(usize, String, String)> {
        let word = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
        self.forward
            .iter()
            .filter(|((kind, original), _)| {
                *kind == Kind::Str
                    && original.chars().count() >= 3
                    && original.chars().any(char::is_alphanumeric)
            })
            .flat_map(|((_, original), placeholder)| {
                text.match_indices(original.as_str())
                    .filter(|(at, _)| {
                        let end = at + original.len();
                        let (first, last) = (original.chars().next(), original.chars().last());
                        // Inside a longer word: a word character on both sides of an edge.
                        let joined_before = word(first) && word(text[..*at].chars().next_back());
                        let joined_after = word(last) && word(text[end..].chars().next());
                        !joined_before && !joined_after
                    })
                    .map(move |(at, _)| (at, original, placeholder))
            })
            .min_by_key(|(at, original, _)| (*at, std::cmp::Reverse(original.len())))
            .map(|(at, original, placeholder)| (at, original.clone(), placeholder.clone()))
    }

    fn mask_piece(&mut self, piece: &str) -> String {
        // Trailing sentence punctuation is not part of a path.
        let core = piece.trim_end_matches(['.', ',', ';', ':', '!', '?', ')']);
        let core = core.trim_start_matches('(');
        let lead = piece.find(core).unwrap_or(0);
        let as_path = Path::new(core);
        let known_file = core.rsplit_once('.').is_some_and(|(s, _)| !s.is_empty())
            && (Lang::detect(as_path).is_some_and(Lang::is_code) || Lang::known_text_ext(as_path));
        let looks_like_path = core.contains('/') || known_file;
        if looks_like_path && !core.is_empty() {
            let masked = self.mask_path(core);
            return format!("{}{masked}{}", &piece[..lead], &piece[lead + core.len()..]);
        }
        self.map_words(piece, |m, w| {
            let code_shaped = w.contains('_')
                || w.chars().any(|c| c.is_ascii_digit())
                || w.chars().skip(1).any(char::is_uppercase);
            if m.knows_identifier(w) || code_shaped || is_placeholder(w) {
                Some(m.placeholder(Kind::Ident, w))
            } else {
                None
            }
        })
    }
}
