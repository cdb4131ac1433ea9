//! Masking for secure mode: source text with every identifier, string literal and comment
//! replaced by a stable placeholder, keywords, operators, punctuation, numbers and layout
//! kept, so a cloud model sees a program's shape and never its names or text.
//!
//! One [`Masker`] per task: the same identifier gets the same placeholder everywhere it
//! masks (code, file paths, the request), and [`Masker::unmask`] maps placeholders in a
//! model's answer back. Code is read with the tree-sitter grammars of [`crate::lang`]; what
//! has no grammar (docs, skeletons, prose) is masked word by word.
//!
//! Placeholders are `id<N>` (identifiers and path segments shaped like them), `str<N>`
//! (string contents, quotes kept), `cmt<N>` (comment bodies, comment markers kept) and
//! `file<N>` (other path segments). A placeholder is recognised only as a whole word (not
//! inside a longer run of letters and digits), so unmasking a masked text gives it back
//! byte for byte.

use std::collections::HashMap;
use std::path::Path;

use tree_sitter::{Node, Parser};

use crate::lang::{grammar, Lang};
use crate::pack::{Mode, Selection};

mod prose;

/// The placeholder families.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Kind {
    Ident,
    Str,
    Comment,
    File,
}

impl Kind {
    fn prefix(self) -> &'static str {
        match self {
            Kind::Ident => "id",
            Kind::Str => "str",
            Kind::Comment => "cmt",
            Kind::File => "file",
        }
    }
}

const KINDS: [Kind; 4] = [Kind::Ident, Kind::Str, Kind::Comment, Kind::File];

/// Named leaves that are the language's own words (`True`, `self`, `i32`, `null`), kept.
const KEPT_KINDS: &[&str] = &[
    "true",
    "false",
    "none",
    "null",
    "nil",
    "iota",
    "undefined",
    "null_literal",
    "boolean_literal",
    "self",
    "crate",
    "super",
    "this",
    "mutable_specifier",
    "primitive_type",
    "predefined_type",
    "void_type",
    "boolean_type",
    "integral_type",
    "floating_point_type",
];

/// Words kept when masking text without a grammar (skeletons, prose in backticks): the
/// keywords of the languages gaffer parses, so a skeleton still reads `def`, `fn`, `class`.
const KEYWORDS: &[&str] = &[
    "abstract",
    "and",
    "as",
    "assert",
    "async",
    "await",
    "bool",
    "boolean",
    "break",
    "byte",
    "case",
    "catch",
    "char",
    "class",
    "const",
    "continue",
    "crate",
    "def",
    "default",
    "defer",
    "del",
    "delete",
    "do",
    "double",
    "dyn",
    "elif",
    "else",
    "enum",
    "except",
    "export",
    "extends",
    "extern",
    "false",
    "False",
    "final",
    "finally",
    "float",
    "fn",
    "for",
    "from",
    "func",
    "function",
    "global",
    "go",
    "if",
    "impl",
    "implements",
    "import",
    "in",
    "instanceof",
    "int",
    "interface",
    "is",
    "lambda",
    "let",
    "long",
    "loop",
    "match",
    "mod",
    "mut",
    "new",
    "nil",
    "None",
    "nonlocal",
    "not",
    "null",
    "or",
    "package",
    "pass",
    "private",
    "protected",
    "pub",
    "public",
    "raise",
    "ref",
    "return",
    "self",
    "Self",
    "short",
    "static",
    "struct",
    "super",
    "switch",
    "this",
    "throw",
    "throws",
    "trait",
    "true",
    "True",
    "try",
    "type",
    "typeof",
    "unsafe",
    "use",
    "var",
    "void",
    "where",
    "while",
    "with",
    "yield",
    "i8",
    "i16",
    "i32",
    "i64",
    "i128",
    "isize",
    "u8",
    "u16",
    "u32",
    "u64",
    "u128",
    "usize",
    "f32",
    "f64",
    "str",
    "string",
    "number",
];

/// The placeholder table of one task: original text ↔ placeholder, per family.
#[derive(Clone, Debug, Default)]
pub struct Masker {
    forward: HashMap<(Kind, String), String>,
    back: HashMap<String, String>,
    counters: HashMap<Kind, usize>,
}

impl Masker {
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }

    /// How many placeholders have been handed out.
    pub fn len(&self) -> usize {
        self.back.len()
    }

    /// Whether nothing was masked yet.
    pub fn is_empty(&self) -> bool {
        self.back.is_empty()
    }

    /// Whether `word` is an identifier this table has masked.
    pub fn knows_identifier(&self, word: &str) -> bool {
        self.forward.contains_key(&(Kind::Ident, word.to_owned()))
    }

    fn placeholder(&mut self, kind: Kind, original: &str) -> String {
        if let Some(p) = self.forward.get(&(kind, original.to_owned())) {
            return p.clone();
        }
        let n = self.counters.entry(kind).or_insert(0);
        *n += 1;
        let p = format!("{}{n}", kind.prefix());
        self.forward.insert((kind, original.to_owned()), p.clone());
        self.back.insert(p.clone(), original.to_owned());
        p
    }

    /// `source` in language `lang` with identifiers, string contents and comment bodies
    /// replaced. Without a grammar (`Text`), every word but keywords and numbers is masked.
    pub fn mask_source(&mut self, lang: Lang, source: &str) -> String {
        let Some(g) = grammar(lang) else {
            return self.mask_words(source);
        };
        let mut parser = Parser::new();
        let tree = match parser.set_language(&g.language) {
            Ok(()) => parser.parse(source, None),
            Err(_) => None,
        };
        let Some(tree) = tree else {
            return self.mask_words(source);
        };
        let mut out = String::with_capacity(source.len());
        let mut at = 0;
        self.mask_node(tree.root_node(), source, &mut at, &mut out);
        let rest = &source[at..];
        out.push_str(&self.mask_gap(rest));
        out
    }

    /// Text between two tokens: layout is kept; anything else tree-sitter left outside a
    /// token (it should not) is masked word by word.
    fn mask_gap(&mut self, gap: &str) -> String {
        if gap.chars().all(char::is_whitespace) {
            gap.to_owned()
        } else {
            self.mask_words(gap)
        }
    }

    fn emit(&mut self, node: Node<'_>, source: &str, at: &mut usize, out: &mut String) -> bool {
        let (start, end) = (node.start_byte(), node.end_byte());
        if start < *at || end > source.len() || !source.is_char_boundary(start) {
            return false;
        }
        let gap = &source[*at..start];
        out.push_str(&self.mask_gap(gap));
        *at = start;
        true
    }

    fn mask_node(&mut self, node: Node<'_>, source: &str, at: &mut usize, out: &mut String) {
        let kind = node.kind();
        if node.is_missing() {
            return;
        }
        if kind.contains("comment") {
            if self.emit(node, source, at, out) {
                let text = &source[node.start_byte()..node.end_byte()];
                out.push_str(&self.mask_comment(text));
                *at = node.end_byte();
            }
            return;
        }
        if is_string_kind(kind) {
            if self.emit(node, source, at, out) {
                out.push_str(&self.mask_string(node, source));
                *at = node.end_byte();
            }
            return;
        }
        if node.child_count() == 0 {
            if self.emit(node, source, at, out) {
                let text = &source[node.start_byte()..node.end_byte()];
                out.push_str(&self.mask_leaf(node, text));
                *at = node.end_byte();
            }
            return;
        }
        let mut cursor = node.walk();
        for child in node.children(&mut cursor) {
            self.mask_node(child, source, at, out);
        }
    }

    fn mask_leaf(&mut self, node: Node<'_>, text: &str) -> String {
        let kind = node.kind();
        let has_alnum = text.chars().any(char::is_alphanumeric);
        if !has_alnum {
            return text.to_owned();
        }
        if !node.is_named() && text == kind {
            return text.to_owned(); // a keyword of the grammar
        }
        if node.is_named() && (KEPT_KINDS.contains(&kind) || is_number_kind(kind)) {
            return text.to_owned();
        }
        // Identifiers (`#private`, `$meta`, `r#raw` keep their sigil) and anything else
        // named: masked whole.
        let sigil = if text.starts_with("r#") {
            2
        } else {
            text.find(|c: char| c.is_alphanumeric() || c == '_')
                .unwrap_or(0)
        };
        let (head, word) = text.split_at(sigil);
        if is_word(word) {
            format!("{head}{}", self.placeholder(Kind::Ident, word))
        } else {
            self.mask_words(text)
        }
    }

    /// A string literal with its contents (between the delimiters) replaced.
    fn mask_string(&mut self, node: Node<'_>, source: &str) -> String {
        let (start, end) = (node.start_byte(), node.end_byte());
        let text = &source[start..end];
        let kind = node.kind();
        if matches!(kind, "char_literal" | "character_literal" | "rune_literal") {
            return text.to_owned();
        }
        let (from, to) = match string_content_span(node) {
            Some(span) => span,
            None if matches!(kind, "jsx_text" | "regex_pattern") => (start, end),
            None => match quoted_span(text) {
                Some((a, b)) => (start + a, start + b),
                None => return text.to_owned(),
            },
        };
        if from >= to || !source.is_char_boundary(from) || !source.is_char_boundary(to) {
            return text.to_owned();
        }
        let content = &source[from..to];
        if content.chars().all(char::is_whitespace) {
            return text.to_owned();
        }
        format!(
            "{}{}{}",
            &source[start..from],
            self.placeholder(Kind::Str, content),
            &source[to..end]
        )
    }

    /// A comment with its body replaced, its markers (`#`, `//`, `/* */`) and the line
    /// break some grammars include kept.
    fn mask_comment(&mut self, text: &str) -> String {
        let open = ["<!--", "//", "/*", "#", "--"]
            .into_iter()
            .find(|o| text.starts_with(o))
            .unwrap_or("");
        let trimmed = text.trim_end_matches(['\n', '\r']);
        let tail = &text[trimmed.len()..];
        let close = ["*/", "-->"]
            .into_iter()
            .find(|c| open.len() + c.len() <= trimmed.len() && trimmed.ends_with(c))
            .filter(|_| open == "/*" || open == "<!--")
            .unwrap_or("");
        let body = &trimmed[open.len()..trimmed.len() - close.len()];
        if body.trim().is_empty() {
            return text.to_owned();
        }
        format!(
            "{open}{}{close}{tail}",
            self.placeholder(Kind::Comment, body)
        )
    }

    /// Every word (a run of letters, digits and `_`) masked but keywords and numbers:
    /// for text without a grammar (skeleton lines, docs).
    pub fn mask_words(&mut self, text: &str) -> String {
        self.map_words(text, |m, w| {
            if KEYWORDS.contains(&w) || is_number(w) {
                None
            } else {
                Some(m.placeholder(Kind::Ident, w))
            }
        })
    }

    fn map_words(
        &mut self,
        text: &str,
        mut f: impl FnMut(&mut Self, &str) -> Option<String>,
    ) -> String {
        let mut out = String::with_capacity(text.len());
        let mut word_start = None;
        for (i, c) in text
            .char_indices()
            .chain(std::iter::once((text.len(), ' ')))
        {
            let in_word = c.is_alphanumeric() || c == '_';
            match (in_word, word_start) {
                (true, None) => word_start = Some(i),
                (false, Some(s)) => {
                    let w = &text[s..i];
                    match f(self, w) {
                        Some(p) => out.push_str(&p),
                        None => out.push_str(w),
                    }
                    word_start = None;
                }
                _ => {}
            }
            if !in_word && i < text.len() {
                out.push(c);
            }
        }
        out
    }

    /// A repository path with each segment masked: a segment shaped like an identifier
    /// (a module name) gets the identifier's placeholder, so `import ledger` and
    /// `ledger.py` agree; an extension gaffer knows (a language's, a text or a binary
    /// kind) is kept, any other is part of the name (`vault.acme` could name a customer).
    pub fn mask_path(&mut self, path: &str) -> String {
        path.split('/')
            .map(|segment| {
                let (stem, ext) = match segment.rsplit_once('.') {
                    Some((s, e)) if !s.is_empty() && known_extension(e) => (s, Some(e)),
                    _ => (segment, None),
                };
                let masked = if stem.is_empty() {
                    String::new()
                } else if is_word(stem) {
                    self.placeholder(Kind::Ident, stem)
                } else {
                    self.placeholder(Kind::File, stem)
                };
                match ext {
                    Some(e) => format!("{masked}.{e}"),
                    None => masked,
                }
            })
            .collect::<Vec<_>>()
            .join("/")
    }

    /// A selection's pack as an agent gets it, masked: each entry's header with its
    /// path masked, a full file masked with its grammar, skeleton lines word by word
    /// (gaffer's own `# L3-9` line spans kept). Reasons are left out: they quote names.
    pub fn mask_pack(&mut self, selection: &Selection) -> String {
        let mut out = String::new();
        for e in &selection.files {
            let body = e.text.split_once('\n').map_or("", |(_, b)| b);
            // The path first, so placeholders are numbered in reading order.
            let path = self.mask_path(&e.path);
            let (mode, masked) = match e.mode {
                Mode::Full => {
                    let lang = Lang::detect(Path::new(&e.path)).unwrap_or(Lang::Text);
                    ("full", self.mask_source(lang, body))
                }
                Mode::Skeleton => ("skeleton", self.mask_skeleton(body)),
            };
            out.push_str(&format!("----- {path} ({mode}) -----\n{masked}"));
        }
        out
    }

    fn mask_skeleton(&mut self, body: &str) -> String {
        let mut out = String::with_capacity(body.len());
        for line in body.split_inclusive('\n') {
            let (text, newline) = match line.strip_suffix('\n') {
                Some(t) => (t, "\n"),
                None => (line, ""),
            };
            let (signature, span) = match text.rfind("  # L") {
                Some(i) if is_line_span(&text[i + 5..]) => text.split_at(i),
                _ => (text, ""),
            };
            if is_omitted_note(text) {
                out.push_str(text);
            } else {
                out.push_str(&self.mask_words(signature));
                out.push_str(span);
            }
            out.push_str(newline);
        }
        out
    }

    /// `text` with every placeholder this table handed out replaced by its original.
    /// Words that merely look like placeholders are left alone.
    pub fn unmask(&self, text: &str) -> String {
        let mut out = String::with_capacity(text.len());
        let bytes = text.as_bytes();
        let mut i = 0;
        let mut copied = 0;
        while i < bytes.len() {
            let boundary_before = i == 0 || !bytes[i - 1].is_ascii_alphanumeric();
            if boundary_before {
                if let Some(end) = placeholder_at(bytes, i) {
                    if let Some(original) = self.back.get(&text[i..end]) {
                        out.push_str(&text[copied..i]);
                        out.push_str(original);
                        copied = end;
                        i = end;
                        continue;
                    }
                }
            }
            i += 1;
        }
        out.push_str(&text[copied..]);
        out
    }

    /// Every string of a JSON value unmasked (a plan a cloud model wrote).
    pub fn unmask_json(&self, value: &serde_json::Value) -> serde_json::Value {
        use serde_json::Value;
        match value {
            Value::String(s) => Value::String(self.unmask(s)),
            Value::Array(a) => Value::Array(a.iter().map(|v| self.unmask_json(v)).collect()),
            Value::Object(o) => Value::Object(
                o.iter()
                    .map(|(k, v)| (self.unmask(k), self.unmask_json(v)))
                    .collect(),
            ),
            other => other.clone(),
        }
    }
}

/// The end of a placeholder (`id12`) starting at `i`, if one does and ends at a word
/// boundary (`_` counts as one, so `id3_total` unmasks its `id3`).
fn placeholder_at(bytes: &[u8], i: usize) -> Option<usize> {
    KINDS.iter().find_map(|k| {
        let p = k.prefix().as_bytes();
        if !bytes[i..].starts_with(p) {
            return None;
        }
        let digits = bytes[i + p.len()..]
            .iter()
            .take_while(|b| b.is_ascii_digit())
            .count();
        let end = i + p.len() + digits;
        let boundary_after = end == bytes.len() || !bytes[end].is_ascii_alphanumeric();
        (digits > 0 && bytes[i + p.len()] != b'0' && boundary_after).then_some(end)
    })
}

/// Whether `word` (a run of letters, digits and `_`) is a number: decimal digits, or a
/// `0x` / `0o` / `0b` literal, `_` allowed as a separator. Any other word that starts with a
/// digit may be a name (`2fa_vault` in a config, a C macro's value) and is masked.
fn is_number(word: &str) -> bool {
    let digits =
        |s: &str, ok: fn(&u8) -> bool| !s.is_empty() && s.bytes().all(|b| b == b'_' || ok(&b));
    match word.get(..2) {
        Some("0x" | "0X") => digits(&word[2..], u8::is_ascii_hexdigit),
        Some("0o" | "0O" | "0b" | "0B") => digits(&word[2..], u8::is_ascii_digit),
        _ => word.starts_with(|c: char| c.is_ascii_digit()) && digits(word, u8::is_ascii_digit),
    }
}

/// Whether `ext` (a path's last extension) is one gaffer knows, so keeping it says nothing
/// about the project.
fn known_extension(ext: &str) -> bool {
    let path = Path::new("x").with_extension(ext);
    Lang::detect(&path).is_none_or(|lang| lang.is_code() || Lang::known_text_ext(&path))
}

/// `12-30`: the line span a skeleton line ends with.
fn is_line_span(s: &str) -> bool {
    s.split_once('-').is_some_and(|(a, b)| {
        !a.is_empty() && !b.is_empty() && (a.bytes().chain(b.bytes())).all(|c| c.is_ascii_digit())
    })
}

/// `… 3 more definitions`: gaffer's own note under a cut skeleton.
fn is_omitted_note(line: &str) -> bool {
    line.strip_prefix("… ")
        .and_then(|r| r.strip_suffix(" more definitions"))
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|c| c.is_ascii_digit()))
}

fn is_placeholder(word: &str) -> bool {
    placeholder_at(word.as_bytes(), 0) == Some(word.len())
}

fn is_word(s: &str) -> bool {
    !s.is_empty()
        && s.chars().all(|c| c.is_alphanumeric() || c == '_')
        && !s.starts_with(|c: char| c.is_ascii_digit())
}

fn is_string_kind(kind: &str) -> bool {
    matches!(
        kind,
        "string"
            | "string_literal"
            | "raw_string_literal"
            | "interpreted_string_literal"
            | "template_string"
            | "text_block"
            | "regex_pattern"
            | "jsx_text"
            | "system_lib_string"
            | "char_literal"
            | "character_literal"
            | "rune_literal"
    )
}

fn is_number_kind(kind: &str) -> bool {
    kind.contains("integer")
        || kind.contains("float")
        || kind.contains("number")
        || kind.contains("int_literal")
        || kind.contains("imaginary")
}

/// The span of a string node's contents: from its first child that is not a delimiter to
/// its last one (delimiters: anonymous tokens and `*_start` / `*_end` nodes).
fn string_content_span(node: Node<'_>) -> Option<(usize, usize)> {
    let mut cursor = node.walk();
    let inner: Vec<Node<'_>> = node
        .children(&mut cursor)
        .filter(|c| c.is_named() && !c.kind().ends_with("_start") && !c.kind().ends_with("_end"))
        .collect();
    let first = inner.first()?;
    let last = inner.last()?;
    Some((first.start_byte(), last.end_byte()))
}

/// A literal without children: between its first quote and the matching last one.
fn quoted_span(text: &str) -> Option<(usize, usize)> {
    let open = text.find(['"', '\'', '`', '<'])?;
    let quote = text[open..].chars().next()?;
    let close_char = if quote == '<' { '>' } else { quote };
    let close = text.rfind(close_char)?;
    (close > open).then_some((open + 1, close))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_are_recognised_as_whole_words_only() {
        let mut m = Masker::new();
        let p = m.placeholder(Kind::Ident, "ledger_total");
        assert_eq!(p, "id1");
        assert_eq!(
            m.unmask("id1 id12 xid1 id1_x id1"),
            "ledger_total id12 xid1 ledger_total_x ledger_total"
        );
        assert!(is_placeholder("str7") && !is_placeholder("str07") && !is_placeholder("strx"));
    }

    #[test]
    fn prose_keeps_english_and_masks_code_paths_quotes_and_known_names() {
        let mut m = Masker::new();
        let code = m.mask_source(Lang::Python, "def settle(ledger):\n    return ledger\n");
        assert_eq!(code, "def id1(id2):\n    return id2\n");
        let request = "Make settle skip refunds in billing/ledger.py when `open_items` says \"no open invoices\", see InvoiceBook.";
        let masked = m.mask_prose(request);
        assert_eq!(
            masked,
            "Make id1 skip refunds in id3/id2.py when `id4` says \"str1\", see id5."
        );
        assert_eq!(m.unmask(&masked), request);
    }
}
