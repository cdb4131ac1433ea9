//! Per-file facts: definitions, references, imports and terms, extracted from one file's text.
//! These are what the cache stores, keyed by content hash.
//!
//! Two tiers: [`extract`] is what indexing runs on every file (terms, imports, messages, and
//! definitions and references from the token scanner in [`crate::lexical`]); [`parse_symbols`]
//! is the tree-sitter tier (exact definitions with signatures and doc comments, references,
//! syntax-error notes), run lazily on the files a ranking selects.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::OnceLock;

use regex::Regex;
use serde::{Deserialize, Serialize};
use tree_sitter::{Node, Parser, QueryCursor, StreamingIterator};

use crate::lang::{grammar, Lang};

/// One definition (tree-sitter tags `@definition.*`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Def {
    /// The defined name.
    pub name: String,
    /// Kind from the tags query: function, method, class, interface, module, constant, type, macro…
    pub kind: String,
    /// First line of the definition (1-based).
    pub line: u32,
    /// Last line of the definition.
    pub end_line: u32,
    /// The header up to the body, whitespace collapsed (`def update(self, other) -> Dataset:`).
    pub signature: String,
    /// First paragraph of the doc comment or docstring, if any.
    pub doc: Option<String>,
    /// Index (in the same file's `defs`) of the enclosing definition.
    pub parent: Option<u32>,
}

/// An import statement as written; resolved to files when the whole index is known.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Import {
    /// The module / path as written (`os.path`, `./util`, `fmt`, `a/b.h`, `crate::x`).
    pub module: String,
    /// Names imported from it (Python `from m import a, b`).
    pub names: Vec<String>,
    /// Leading dots of a relative Python import.
    pub level: u8,
}

/// Words with counts, sorted and distinct, kept as one `\n`-separated string: loading a file's
/// facts from the cache then costs two allocations per list, not one per word (a repository's
/// facts hold hundreds of thousands of words).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WordCounts {
    words: String,
    counts: Vec<u32>,
}

impl WordCounts {
    /// From words and counts; sorts them and adds up the counts of repeated words.
    pub fn new<S: AsRef<str>>(mut pairs: Vec<(S, u32)>) -> Self {
        pairs.sort_unstable_by(|a, b| a.0.as_ref().cmp(b.0.as_ref()));
        let mut out = WordCounts::default();
        let mut last: Option<&str> = None;
        for (w, c) in &pairs {
            let w = w.as_ref();
            if last == Some(w) {
                if let Some(total) = out.counts.last_mut() {
                    *total += c;
                }
                continue;
            }
            // A word never holds a newline: identifiers and names do not.
            out.words.push_str(&w.replace('\n', " "));
            out.words.push('\n');
            out.counts.push(*c);
            last = Some(w);
        }
        out
    }

    /// The words and their counts, in sorted order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, u32)> {
        self.words
            .split_terminator('\n')
            .zip(self.counts.iter().copied())
    }

    /// The count of `word`, if present.
    pub fn get(&self, word: &str) -> Option<u32> {
        self.iter().find(|(w, _)| *w == word).map(|(_, c)| c)
    }

    /// Number of distinct words.
    pub fn len(&self) -> usize {
        self.counts.len()
    }

    /// Whether there are no words.
    pub fn is_empty(&self) -> bool {
        self.counts.is_empty()
    }
}

/// What one file contributes to the index.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FileFacts {
    /// Line count.
    pub lines: u32,
    /// Definitions in source order.
    pub defs: Vec<Def>,
    /// Referenced names with their counts.
    pub refs: WordCounts,
    /// Import statements.
    pub imports: Vec<Import>,
    /// Lower-cased terms (identifier parts and whole identifiers) with counts.
    pub terms: WordCounts,
    /// Sum of term counts (BM25 document length).
    pub term_total: u32,
    /// Message-like fragments of string literals (`Data variables:`, `No module named`), for
    /// matching error messages and output quoted in a task text.
    pub literals: Vec<String>,
    /// Something the extractor noticed: invalid UTF-8, syntax errors, no grammar.
    pub notes: Vec<String>,
    /// Whether `defs` and `refs` come from tree-sitter ([`parse_symbols`]) rather than the
    /// token scanner.
    pub parsed: bool,
}

/// The tree-sitter tier of one file: what replaces the scanner's definitions and references.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ParsedSymbols {
    /// Definitions in source order.
    pub defs: Vec<Def>,
    /// Referenced names with their counts.
    pub refs: WordCounts,
    /// Syntax errors, or why the file could not be parsed.
    pub notes: Vec<String>,
}

impl FileFacts {
    /// Replaces the scanner's definitions and references with tree-sitter's.
    pub fn apply(&mut self, symbols: ParsedSymbols) {
        self.defs = symbols.defs;
        self.refs = symbols.refs;
        self.notes.extend(symbols.notes);
        self.parsed = true;
    }
}

thread_local! {
    static PARSER: RefCell<Parser> = RefCell::new(Parser::new());
}

/// Extracts facts from `bytes` of a file in `lang`. Never fails: what cannot be understood is
/// noted in [`FileFacts::notes`] and the rest is kept.
pub fn extract(lang: Lang, bytes: &[u8]) -> FileFacts {
    let mut facts = FileFacts::default();
    let text = match std::str::from_utf8(bytes) {
        Ok(t) => std::borrow::Cow::Borrowed(t),
        Err(e) => {
            facts.notes.push(format!(
                "invalid UTF-8 at byte {}: decoded lossily",
                e.valid_up_to()
            ));
            String::from_utf8_lossy(bytes)
        }
    };
    let text: &str = &text;
    facts.lines = text.lines().count() as u32;
    let mut terms: HashMap<String, u32, rustc_hash::FxBuildHasher> = HashMap::default();
    facts.term_total = add_terms(text, &mut terms, 1);
    facts.terms = WordCounts::new(terms.into_iter().collect());
    facts.imports = imports(lang, text);
    if lang.is_code() {
        facts.literals = literals(text);
        let symbols = crate::lexical::scan(lang, text);
        facts.defs = symbols.defs;
        facts.refs = symbols.refs;
    }
    facts
}

/// The tree-sitter tier: definitions (with signatures, spans, doc comments, nesting) and
/// references of `bytes` from the grammar's tags query. Never fails: a file tree-sitter cannot
/// parse gets a note, one with syntax errors keeps what was recovered.
pub fn parse_symbols(lang: Lang, bytes: &[u8]) -> ParsedSymbols {
    let text = String::from_utf8_lossy(bytes);
    let mut facts = FileFacts::default();
    match grammar(lang) {
        Some(g) => tags(g, &text, lang, &mut facts),
        None if lang.is_code() => facts
            .notes
            .push(format!("no grammar for {}: words only", lang.tag())),
        None => {}
    }
    ParsedSymbols {
        defs: facts.defs,
        refs: facts.refs,
        notes: facts.notes,
    }
}

fn tags(g: &crate::lang::Grammar, text: &str, lang: Lang, facts: &mut FileFacts) {
    let tree = PARSER.with(|p| {
        let mut p = p.borrow_mut();
        if p.set_language(&g.language).is_err() {
            return None;
        }
        p.parse(text, None)
    });
    let Some(tree) = tree else {
        facts
            .notes
            .push("tree-sitter could not parse the file: words only".into());
        return;
    };
    let root = tree.root_node();
    if root.has_error() {
        let line = first_error_line(root).unwrap_or(0);
        facts.notes.push(format!(
            "syntax errors (first near line {line}): partial symbols"
        ));
    }
    let names = g.tags.capture_names();
    let mut cursor = QueryCursor::new();
    let mut matches = cursor.matches(&g.tags, root, text.as_bytes());
    let mut defs: Vec<(usize, usize, Def)> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let mut refs: HashMap<String, u32> = HashMap::new();
    while let Some(m) = matches.next() {
        let mut name_node = None;
        let mut role: Option<(&str, Node)> = None;
        for c in m.captures {
            let cname = names[c.index as usize];
            if cname == "name" {
                name_node = Some(c.node);
            } else if cname.starts_with("definition.") || cname.starts_with("reference.") {
                role = Some((cname, c.node));
            }
        }
        let (Some(name_node), Some((cname, node))) = (name_node, role) else {
            continue;
        };
        let Ok(name) = name_node.utf8_text(text.as_bytes()) else {
            continue;
        };
        if name.is_empty() || name.len() > 200 {
            continue;
        }
        if let Some(kind) = cname.strip_prefix("definition.") {
            if !seen.insert((node.start_byte(), name.to_string())) {
                continue;
            }
            defs.push((
                node.start_byte(),
                node.end_byte(),
                Def {
                    name: name.to_string(),
                    kind: kind.to_string(),
                    line: node.start_position().row as u32 + 1,
                    end_line: node.end_position().row as u32 + 1,
                    signature: signature(node, text),
                    doc: doc(node, text, lang),
                    parent: None,
                },
            ));
        } else {
            *refs.entry(name.to_string()).or_insert(0) += 1;
        }
    }
    defs.sort_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)));
    let mut stack: Vec<(usize, u32)> = Vec::new();
    for (i, (start, end, def)) in defs.iter_mut().enumerate() {
        while let Some(&(top_end, _)) = stack.last() {
            if top_end <= *start {
                stack.pop();
            } else {
                break;
            }
        }
        def.parent = stack.last().map(|&(_, idx)| idx);
        stack.push((*end, i as u32));
    }
    facts.defs = defs.into_iter().map(|(_, _, d)| d).collect();
    facts.refs = WordCounts::new(refs.into_iter().collect());
}

fn first_error_line(node: Node) -> Option<usize> {
    let mut cursor = node.walk();
    let mut stack = vec![node];
    while let Some(n) = stack.pop() {
        if n.is_error() || n.is_missing() {
            return Some(n.start_position().row + 1);
        }
        if n.has_error() {
            let children: Vec<Node> = n.children(&mut cursor).collect();
            stack.extend(children.into_iter().rev());
        }
    }
    None
}

/// `s` with runs of whitespace collapsed to one space, cut at `max` bytes with `…`.
pub(crate) fn collapse(s: &str, max: usize) -> String {
    let mut out = String::with_capacity(s.len().min(max + 3));
    for word in s.split_whitespace() {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(word);
        if out.len() > max {
            let mut cut = max;
            while !out.is_char_boundary(cut) {
                cut -= 1;
            }
            out.truncate(cut);
            out.push('…');
            break;
        }
    }
    out
}

fn signature(node: Node, text: &str) -> String {
    let start = node.start_byte();
    let end = match node.child_by_field_name("body") {
        // The header ends with the last child before the body that is not a comment (a comment
        // between `def f():` and its first statement is not part of the signature).
        Some(body) => {
            let mut cursor = node.walk();
            node.children(&mut cursor)
                .take_while(|c| c.start_byte() < body.start_byte())
                .filter(|c| !c.kind().contains("comment"))
                .map(|c| c.end_byte())
                .max()
                .unwrap_or(body.start_byte())
        }
        None => {
            let rest = text.get(start..node.end_byte()).unwrap_or("");
            start + rest.find('\n').unwrap_or(rest.len())
        }
    };
    let head = text.get(start..end).unwrap_or("");
    let head = head.trim_end().trim_end_matches('{').trim_end();
    collapse(head, 240)
}

fn doc(node: Node, text: &str, lang: Lang) -> Option<String> {
    if lang == Lang::Python {
        let body = node.child_by_field_name("body")?;
        let first = body.named_child(0)?;
        if first.kind() != "expression_statement" {
            return None;
        }
        let s = first.named_child(0)?;
        if s.kind() != "string" {
            return None;
        }
        let raw = s.utf8_text(text.as_bytes()).ok()?;
        let inner = raw
            .trim_start_matches(['r', 'u', 'b', 'R', 'U', 'B'])
            .trim_matches(['"', '\'']);
        let para = inner.trim().split("\n\n").next().unwrap_or("");
        let d = collapse(para, 300);
        return (!d.is_empty()).then_some(d);
    }
    let mut lines = Vec::new();
    let mut cur = node;
    let mut row = node.start_position().row;
    while let Some(prev) = cur.prev_sibling() {
        if !prev.kind().contains("comment") || prev.end_position().row + 1 < row {
            break;
        }
        lines.push(prev.utf8_text(text.as_bytes()).unwrap_or(""));
        row = prev.start_position().row;
        cur = prev;
        if lines.len() > 20 {
            break;
        }
    }
    if lines.is_empty() {
        return None;
    }
    lines.reverse();
    let joined: String = lines
        .iter()
        .map(|l| {
            l.trim()
                .trim_start_matches(['/', '*', '!', '#'])
                .trim_end_matches(['*', '/'])
                .trim()
        })
        .collect::<Vec<_>>()
        .join(" ");
    let d = collapse(&joined, 300);
    (!d.is_empty()).then_some(d)
}

/// Splits an identifier into lower-cased parts on `_`, case changes and digits
/// (`parseHTTPResponse_v2` → `parse`, `http`, `response`, `v2`).
pub fn split_identifier(ident: &str) -> Vec<String> {
    let mut parts = Vec::new();
    for chunk in ident.split(['_', '-', '.']) {
        let chars: Vec<char> = chunk.chars().collect();
        let mut start = 0;
        for i in 1..chars.len() {
            let (p, c) = (chars[i - 1], chars[i]);
            let next_lower = chars.get(i + 1).is_some_and(|n| n.is_lowercase());
            let boundary = (p.is_lowercase() && c.is_uppercase())
                || (p.is_uppercase() && c.is_uppercase() && next_lower);
            if boundary {
                parts.push(chars[start..i].iter().collect::<String>().to_lowercase());
                start = i;
            }
        }
        if start < chars.len() {
            parts.push(chars[start..].iter().collect::<String>().to_lowercase());
        }
    }
    parts.retain(|p| p.len() >= 2 && !p.chars().all(|c| c.is_ascii_digit()));
    parts
}

/// Byte ranges of the parts of an ASCII identifier, by the rules of [`split_identifier`]
/// (`_`, lower→upper, the end of an acronym), keeping parts of two or more bytes that are not
/// all digits.
fn split_ascii(ident: &[u8], parts: &mut Vec<(usize, usize)>) {
    parts.clear();
    let mut push = |a: usize, b: usize| {
        if b - a >= 2 && !ident[a..b].iter().all(u8::is_ascii_digit) {
            parts.push((a, b));
        }
    };
    let mut start = 0;
    for i in 0..ident.len() {
        let c = ident[i];
        if c == b'_' {
            if i > start {
                push(start, i);
            }
            start = i + 1;
            continue;
        }
        if i > start {
            let p = ident[i - 1];
            let next_lower = ident.get(i + 1).is_some_and(u8::is_ascii_lowercase);
            if (p.is_ascii_lowercase() && c.is_ascii_uppercase())
                || (p.is_ascii_uppercase() && c.is_ascii_uppercase() && next_lower)
            {
                push(start, i);
                start = i;
            }
        }
    }
    if start < ident.len() {
        push(start, ident.len());
    }
}

fn bump<S: std::hash::BuildHasher>(terms: &mut HashMap<String, u32, S>, key: &str, w: u32) {
    match terms.get_mut(key) {
        Some(c) => *c += w,
        None => {
            terms.insert(key.to_string(), w);
        }
    }
}

/// Adds the terms of `text` (identifier parts, plus whole identifiers that have parts) to
/// `terms` with weight `w`; returns the number of term occurrences added.
pub fn add_terms<S: std::hash::BuildHasher>(
    text: &str,
    terms: &mut HashMap<String, u32, S>,
    w: u32,
) -> u32 {
    let mut total = 0;
    let mut parts = Vec::new();
    let mut buf = String::new();
    for ident in identifiers(text) {
        if ident.len() > 60 {
            continue;
        }
        split_ascii(ident.as_bytes(), &mut parts);
        if parts.len() > 1 {
            buf.clear();
            buf.extend(ident.chars().map(|c| c.to_ascii_lowercase()));
            bump(terms, &buf, w);
            total += w;
        }
        for &(a, b) in &parts {
            buf.clear();
            buf.extend(ident[a..b].chars().map(|c| c.to_ascii_lowercase()));
            bump(terms, &buf, w);
            total += w;
        }
    }
    total
}

/// ASCII identifiers in `text` (`[A-Za-z_][A-Za-z0-9_]*`).
pub fn identifiers(text: &str) -> impl Iterator<Item = &str> {
    let bytes = text.as_bytes();
    let mut i = 0;
    std::iter::from_fn(move || {
        while i < bytes.len() {
            let b = bytes[i];
            if b.is_ascii_alphabetic() || b == b'_' {
                let start = i;
                while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                    i += 1;
                }
                return Some(&text[start..i]);
            } else if b.is_ascii_digit() {
                while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                    i += 1;
                }
            } else {
                i += 1;
            }
        }
        None
    })
}

fn literal_re() -> Option<&'static (Regex, Regex)> {
    static RE: OnceLock<Option<(Regex, Regex)>> = OnceLock::new();
    RE.get_or_init(|| {
        Some((
            Regex::new(r#""(?:[^"\\\n]|\\.){8,300}"|'(?:[^'\\\n]|\\.){8,300}'"#).ok()?,
            Regex::new(r"\{[^{}]*\}|%(?:\([^)]*\))?[-#0 +]*\d*(?:\.\d+)?[sdrifxgeEXc]|\\[ntr]")
                .ok()?,
        ))
    })
    .as_ref()
}

/// Message-like fragments of string literals: split on format placeholders and escapes, at
/// least 8 characters, with a space or `:` in them (so not bare identifiers), at most 200 a file.
fn literals(text: &str) -> Vec<String> {
    let Some((lit, placeholder)) = literal_re() else {
        return Vec::new();
    };
    let mut out: Vec<String> = Vec::new();
    for m in lit.find_iter(text) {
        // Strip the quotes (ASCII, so the slice is on char boundaries).
        let inner = &m.as_str()[1..m.as_str().len() - 1];
        for frag in placeholder.split(inner) {
            let frag = frag.trim();
            if frag.len() >= 8
                && frag.chars().filter(|c| c.is_alphabetic()).count() >= 5
                && (frag.contains(' ') || frag.ends_with(':'))
                && !out.iter().any(|o| o == frag)
            {
                out.push(frag.to_string());
            }
        }
        if out.len() >= 200 {
            break;
        }
    }
    out
}

struct ImportRes {
    py_import: Regex,
    py_from: Regex,
    js: Regex,
    go_single: Regex,
    go_block: Regex,
    go_path: Regex,
    java: Regex,
    c_include: Regex,
    rust_mod: Regex,
    rust_use: Regex,
}

fn import_res() -> Option<&'static ImportRes> {
    static RES: OnceLock<Option<ImportRes>> = OnceLock::new();
    RES.get_or_init(|| {
        Some(ImportRes {
            py_import: Regex::new(r"(?m)^[ \t]*import[ \t]+([\w.]+(?:[ \t]+as[ \t]+\w+)?(?:[ \t]*,[ \t]*[\w.]+(?:[ \t]+as[ \t]+\w+)?)*)").ok()?,
            py_from: Regex::new(r"(?m)^[ \t]*from[ \t]+(\.*)([\w.]*)[ \t]+import[ \t]+(\([^)]*\)|[^\n#]+)").ok()?,
            js: Regex::new(r#"(?:\bfrom|\bimport|\brequire\s*\(|\bimport\s*\()\s*['"]([^'"\n]+)['"]"#).ok()?,
            go_single: Regex::new(r#"(?m)^import[ \t]+(?:\w+[ \t]+)?"([^"]+)""#).ok()?,
            go_block: Regex::new(r"(?ms)^import[ \t]*\((.*?)\)").ok()?,
            go_path: Regex::new(r#""([^"]+)""#).ok()?,
            java: Regex::new(r"(?m)^[ \t]*import[ \t]+(?:static[ \t]+)?([\w.]+(?:\.\*)?)[ \t]*;").ok()?,
            c_include: Regex::new(r#"(?m)^[ \t]*#[ \t]*include[ \t]*[<"]([^>"]+)[>"]"#).ok()?,
            rust_mod: Regex::new(r"(?m)^[ \t]*(?:pub(?:\([^)]*\))?[ \t]+)?mod[ \t]+(\w+)[ \t]*;").ok()?,
            rust_use: Regex::new(r"(?m)^[ \t]*(?:pub(?:\([^)]*\))?[ \t]+)?use[ \t]+((?:crate|super|self)(?:::\w+)+)").ok()?,
        })
    })
    .as_ref()
}

fn imports(lang: Lang, text: &str) -> Vec<Import> {
    let Some(re) = import_res() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let plain = |m: &str| Import {
        module: m.to_string(),
        names: Vec::new(),
        level: 0,
    };
    match lang {
        Lang::Python => {
            for c in re.py_import.captures_iter(text) {
                for part in c[1].split(',') {
                    let m = part.split_whitespace().next().unwrap_or("");
                    if !m.is_empty() {
                        out.push(plain(m));
                    }
                }
            }
            for c in re.py_from.captures_iter(text) {
                let names = c[3]
                    .trim_matches(['(', ')'])
                    .split(',')
                    .filter_map(|n| n.split_whitespace().next())
                    .filter(|n| *n != "*" && *n != "\\")
                    .map(str::to_string)
                    .collect();
                out.push(Import {
                    module: c[2].to_string(),
                    names,
                    level: c[1].len() as u8,
                });
            }
        }
        Lang::JavaScript | Lang::TypeScript | Lang::Tsx => {
            out.extend(re.js.captures_iter(text).map(|c| plain(&c[1])));
        }
        Lang::Go => {
            out.extend(re.go_single.captures_iter(text).map(|c| plain(&c[1])));
            for b in re.go_block.captures_iter(text) {
                out.extend(re.go_path.captures_iter(&b[1]).map(|c| plain(&c[1])));
            }
        }
        Lang::Java => out.extend(re.java.captures_iter(text).map(|c| plain(&c[1]))),
        Lang::C | Lang::Cpp => out.extend(re.c_include.captures_iter(text).map(|c| plain(&c[1]))),
        Lang::Rust => {
            out.extend(re.rust_mod.captures_iter(text).map(|c| Import {
                module: c[1].to_string(),
                names: Vec::new(),
                level: 1,
            }));
            out.extend(re.rust_use.captures_iter(text).map(|c| plain(&c[1])));
        }
        Lang::Text => {}
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn the_ascii_splitter_agrees_with_split_identifier(ident in "[A-Za-z_][A-Za-z0-9_]{0,30}") {
            let mut parts = Vec::new();
            split_ascii(ident.as_bytes(), &mut parts);
            let fast: Vec<String> = parts.iter().map(|&(a, b)| ident[a..b].to_ascii_lowercase()).collect();
            prop_assert_eq!(fast, split_identifier(&ident));
        }
    }

    #[test]
    fn word_counts_sort_merge_and_find_words() {
        let w = WordCounts::new(vec![("b", 1), ("a", 2), ("b", 3)]);
        let all: Vec<(&str, u32)> = w.iter().collect();
        assert_eq!(all, vec![("a", 2), ("b", 4)]);
        assert_eq!((w.get("b"), w.get("c"), w.len()), (Some(4), None, 2));
        let bytes = postcard::to_allocvec(&w).unwrap();
        assert_eq!(postcard::from_bytes::<WordCounts>(&bytes).unwrap(), w);
        assert!(WordCounts::new(Vec::<(String, u32)>::new()).is_empty());
    }

    #[test]
    fn identifiers_split_on_case_underscores_and_acronyms() {
        assert_eq!(
            split_identifier("parseHTTPResponse_v2"),
            vec!["parse", "http", "response", "v2"]
        );
        let mut terms: HashMap<String, u32> = HashMap::new();
        assert_eq!(add_terms("get_value(getValue) x", &mut terms, 1), 6);
        assert_eq!(terms["get"], 2);
        assert_eq!(terms["get_value"], 1);
        assert_eq!(terms["getvalue"], 1);
        assert!(!terms.contains_key("x"));
    }
}
