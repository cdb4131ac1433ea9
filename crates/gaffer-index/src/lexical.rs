//! The fast tier of the index: definitions and references found by scanning tokens, without a
//! parse tree (the way ctags works). It skips strings and comments, follows brace depth (C-like
//! languages) or indentation (Python), and recognises definitions by their keywords or by their
//! shape (`name(…) {` where a function may be defined). Every file gets these facts when it is
//! indexed; the tree-sitter tier ([`crate::facts::parse_symbols`]) replaces them with exact ones,
//! signatures and doc comments for the files a ranking selects.

use std::collections::HashMap;

use crate::facts::Def;
use crate::lang::Lang;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Ident,
    /// One punctuation byte (`(`, `{`, `=`, `:`, `.`…); `=` only when it is a plain assignment.
    Punct(u8),
    /// `=>` (JS arrow) or `->`.
    Arrow,
    /// `::`.
    Path,
    /// A string or character literal.
    Str,
}

#[derive(Clone, Copy, Debug)]
struct Tok {
    kind: Kind,
    start: u32,
    end: u32,
    line: u32,
    /// Line of the token's last byte (strings may span lines).
    end_line: u32,
    /// Column of the token if it is the first on its line, else `u32::MAX`.
    indent: u32,
}

struct Syntax {
    hash_comments: bool,
    python_strings: bool,
    /// `'` opens a char literal only if it closes right after (Rust lifetimes, Go runes).
    quote_is_char: bool,
    backtick_strings: bool,
    rust_raw_strings: bool,
}

fn syntax(lang: Lang) -> Syntax {
    Syntax {
        hash_comments: lang == Lang::Python,
        python_strings: lang == Lang::Python,
        quote_is_char: matches!(lang, Lang::Rust | Lang::Go),
        backtick_strings: matches!(
            lang,
            Lang::Go | Lang::JavaScript | Lang::TypeScript | Lang::Tsx
        ),
        rust_raw_strings: lang == Lang::Rust,
    }
}

fn is_ident_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b >= 0x80
}

/// Splits `text` into identifiers, punctuation and literals; comments and whitespace are dropped.
fn tokenize(text: &str, lang: Lang) -> Vec<Tok> {
    let syn = syntax(lang);
    let b = text.as_bytes();
    let n = b.len();
    let mut out: Vec<Tok> = Vec::with_capacity(n / 5);
    let (mut i, mut line, mut line_start, mut line_has_tok) = (0usize, 1u32, 0usize, false);
    // `$from` is where the token's first line starts (a literal may have moved `line_start`).
    macro_rules! push {
        ($kind:expr, $start:expr, $end:expr, $line:expr) => {
            push!($kind, $start, $end, $line, line_start)
        };
        ($kind:expr, $start:expr, $end:expr, $line:expr, $from:expr) => {{
            let indent = if line_has_tok {
                u32::MAX
            } else {
                ($start - $from) as u32
            };
            line_has_tok = true;
            out.push(Tok {
                kind: $kind,
                start: $start as u32,
                end: $end as u32,
                line: $line,
                end_line: line,
                indent,
            });
        }};
    }
    // Skips a quoted literal opened at `i` (the quote is `q`, repeated `reps` times); returns
    // the index after it, counting newlines.
    let skip_quoted = |mut j: usize, q: u8, reps: usize, line: &mut u32, line_start: &mut usize| {
        let escapes = q != b'`' || syn.backtick_strings;
        while j < n {
            let c = b[j];
            if c == b'\\' && escapes && q != b'`' {
                if b.get(j + 1) == Some(&b'\n') {
                    *line += 1;
                    *line_start = j + 2;
                }
                j += 2;
                continue;
            }
            if c == b'\n' {
                if reps == 1 && q != b'`' {
                    // An unterminated one-line literal ends at the line's end.
                    return j;
                }
                *line += 1;
                *line_start = j + 1;
            }
            if c == q && (reps == 1 || b[j..].starts_with(&[q; 3][..reps])) {
                return j + reps;
            }
            j += 1;
        }
        n
    };
    while i < n {
        let c = b[i];
        match c {
            b'\n' => {
                line += 1;
                i += 1;
                line_start = i;
                line_has_tok = false;
            }
            b' ' | b'\t' | b'\r' | 0x0c => i += 1,
            b'#' if syn.hash_comments => {
                while i < n && b[i] != b'\n' {
                    i += 1;
                }
            }
            b'/' if !syn.hash_comments && b.get(i + 1) == Some(&b'/') => {
                while i < n && b[i] != b'\n' {
                    i += 1;
                }
            }
            b'/' if !syn.hash_comments && b.get(i + 1) == Some(&b'*') => {
                i += 2;
                while i < n && !(b[i] == b'*' && b.get(i + 1) == Some(&b'/')) {
                    if b[i] == b'\n' {
                        line += 1;
                        line_start = i + 1;
                        line_has_tok = false;
                    }
                    i += 1;
                }
                i = (i + 2).min(n);
            }
            b'"' | b'\'' | b'`' => {
                let start = i;
                let start_line = line;
                if c == b'`' && !syn.backtick_strings {
                    push!(Kind::Punct(c), i, i + 1, line);
                    i += 1;
                    continue;
                }
                if c == b'\'' && syn.quote_is_char {
                    // A char literal is `'x'` or `'\…'`; anything else is a lifetime or label.
                    let is_char = match b.get(i + 1) {
                        Some(b'\\') => true,
                        Some(_) => {
                            let w = text[i + 1..].chars().next().map_or(1, char::len_utf8);
                            b.get(i + 1 + w) == Some(&b'\'')
                        }
                        None => false,
                    };
                    if !is_char {
                        i += 1;
                        continue;
                    }
                }
                let reps = if syn.python_strings && b[i..].starts_with(&[c; 3]) {
                    3
                } else {
                    1
                };
                let from = line_start;
                let mut ls = line_start;
                i = skip_quoted(i + reps, c, reps, &mut line, &mut ls);
                line_start = ls;
                push!(Kind::Str, start, i, start_line, from);
            }
            c if is_ident_byte(c) && !c.is_ascii_digit() => {
                let start = i;
                while i < n && is_ident_byte(b[i]) {
                    i += 1;
                }
                let word = &b[start..i];
                let next = b.get(i).copied();
                // String prefixes: Python `r"…"`, `f'…'`, `b"""…"""`; Rust `r#"…"#`, `b"…"`.
                if syn.python_strings
                    && word.len() <= 2
                    && word.iter().all(|c| b"rRbBuUfF".contains(c))
                    && matches!(next, Some(b'"' | b'\''))
                {
                    continue;
                }
                if syn.rust_raw_strings && matches!(word, b"r" | b"br") && next == Some(b'#') {
                    let hashes = b[i..].iter().take_while(|&&c| c == b'#').count();
                    if b.get(i + hashes) == Some(&b'"') {
                        let (start_line, from) = (line, line_start);
                        let mut j = i + hashes + 1;
                        while j < n {
                            if b[j] == b'\n' {
                                line += 1;
                                line_start = j + 1;
                            }
                            if b[j] == b'"'
                                && b[j + 1..]
                                    .iter()
                                    .take(hashes)
                                    .filter(|&&c| c == b'#')
                                    .count()
                                    == hashes
                            {
                                j += 1 + hashes;
                                break;
                            }
                            j += 1;
                        }
                        i = j.min(n);
                        push!(Kind::Str, start, i, start_line, from);
                        continue;
                    }
                }
                if syn.rust_raw_strings && matches!(word, b"r" | b"b" | b"br") && next == Some(b'"')
                {
                    continue;
                }
                push!(Kind::Ident, start, i, line);
            }
            c if c.is_ascii_digit() => {
                while i < n && (is_ident_byte(b[i]) || b[i] == b'.') {
                    i += 1;
                }
            }
            b'=' | b'-' if b.get(i + 1) == Some(&b'>') => {
                push!(Kind::Arrow, i, i + 2, line);
                i += 2;
            }
            b':' if b.get(i + 1) == Some(&b':') => {
                push!(Kind::Path, i, i + 2, line);
                i += 2;
            }
            b'=' => {
                // Only a plain assignment is an `=` token; `==`, `<=`, `+=`… are other operators.
                let prev = if i > 0 { b[i - 1] } else { b' ' };
                let plain = b.get(i + 1) != Some(&b'=') && !b"=!<>+-*/%&|^:~@".contains(&prev);
                push!(Kind::Punct(if plain { b'=' } else { b'~' }), i, i + 1, line);
                i += 1;
                if !plain {
                    while i < n && b[i] == b'=' {
                        i += 1;
                    }
                }
            }
            _ => {
                push!(Kind::Punct(c), i, i + 1, line);
                i += 1;
            }
        }
    }
    out
}

const PY_KEYWORDS: &[&str] = &[
    "and", "as", "assert", "await", "del", "elif", "else", "except", "for", "from", "global", "if",
    "import", "in", "is", "lambda", "nonlocal", "not", "or", "pass", "raise", "return", "while",
    "with", "yield", "print", "exec", "match", "case", "async", "def", "class", "try", "finally",
    "True", "False", "None",
];

const C_KEYWORDS: &[&str] = &[
    "if",
    "else",
    "for",
    "while",
    "do",
    "switch",
    "case",
    "return",
    "catch",
    "sizeof",
    "typeof",
    "alignof",
    "decltype",
    "new",
    "delete",
    "throw",
    "throws",
    "function",
    "await",
    "yield",
    "in",
    "of",
    "instanceof",
    "void",
    "with",
    "synchronized",
    "assert",
    "super",
    "this",
    "self",
    "Self",
    "match",
    "loop",
    "where",
    "as",
    "defined",
    "static_assert",
    "noexcept",
    "require",
    "import",
    "export",
    "default",
    "constructor",
    "go",
    "defer",
    "select",
    "range",
    "func",
    "fn",
    "move",
    "unsafe",
    "impl",
    "dyn",
    "ref",
    "mut",
    "let",
    "const",
    "var",
    "static",
    "operator",
    "template",
    "typename",
    "using",
    "namespace",
    "goto",
    "break",
    "continue",
    "elif",
    "_Generic",
];

/// What [`scan`] finds in one file.
pub struct Symbols {
    /// Definitions in source order, with spans and nesting (no doc comments).
    pub defs: Vec<Def>,
    /// Referenced names (calls, constructed and implemented types) with counts.
    pub refs: crate::facts::WordCounts,
}

/// Definitions and references of `text` by token scanning (see the module docs).
pub fn scan(lang: Lang, text: &str) -> Symbols {
    let toks = tokenize(text, lang);
    let mut s = Scanner {
        text,
        toks: &toks,
        defs: Vec::new(),
        refs: HashMap::new(),
    };
    match lang {
        Lang::Python => s.python(),
        Lang::Text => {}
        _ => s.braces(lang),
    }
    Symbols {
        defs: s.defs,
        refs: crate::facts::WordCounts::new(s.refs.into_iter().collect()),
    }
}

struct Scanner<'a> {
    text: &'a str,
    toks: &'a [Tok],
    defs: Vec<Def>,
    refs: HashMap<String, u32>,
}

/// What a `{` opens.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Block {
    /// Top level, a namespace or module: functions and types may be defined.
    Items,
    /// A class, struct, trait, impl or interface body: methods may be defined.
    Members,
    /// A function body or any other block: only keyword definitions (nested functions).
    Code,
}

impl<'a> Scanner<'a> {
    fn word(&self, k: usize) -> &'a str {
        let t = &self.toks[k];
        &self.text[t.start as usize..t.end as usize]
    }

    fn is(&self, k: usize, kind: Kind) -> bool {
        self.toks.get(k).is_some_and(|t| t.kind == kind)
    }

    fn ident(&self, k: usize) -> Option<&'a str> {
        self.is(k, Kind::Ident).then(|| self.word(k))
    }

    fn add_ref(&mut self, name: &str) {
        match self.refs.get_mut(name) {
            Some(c) => *c += 1,
            None => {
                self.refs.insert(name.to_string(), 1);
            }
        }
    }

    /// The index of the token closing the bracket opened at `k` (or the last token).
    fn closing(&self, k: usize) -> usize {
        let Kind::Punct(open) = self.toks[k].kind else {
            return k;
        };
        let close = match open {
            b'(' => b')',
            b'[' => b']',
            b'{' => b'}',
            b'<' => b'>',
            _ => return k,
        };
        let mut depth = 0usize;
        for (j, t) in self.toks.iter().enumerate().skip(k) {
            match t.kind {
                Kind::Punct(c) if c == open => depth += 1,
                Kind::Punct(c) if c == close => {
                    depth -= 1;
                    if depth == 0 {
                        return j;
                    }
                }
                // A `;` or `{` ends a runaway `<` (a comparison, not generics).
                Kind::Punct(b';' | b'{') if open == b'<' => return k,
                _ => {}
            }
        }
        self.toks.len().saturating_sub(1)
    }

    /// The signature: the source from the statement start to `end` (exclusive), collapsed.
    fn signature(&self, from: usize, end_byte: usize) -> String {
        let start = self.toks[from].start as usize;
        let head = self.text.get(start..end_byte.max(start)).unwrap_or("");
        crate::facts::collapse(head.trim_end(), 240)
    }

    fn push_def(&mut self, name: &str, kind: &str, line: u32, parent: Option<u32>) -> usize {
        self.defs.push(Def {
            name: name.to_string(),
            kind: kind.to_string(),
            line,
            end_line: line,
            signature: String::new(),
            doc: None,
            parent,
        });
        self.defs.len() - 1
    }

    fn python(&mut self) {
        let toks = self.toks;
        // Open definitions: (indent, def index).
        let mut open: Vec<(u32, usize)> = Vec::new();
        let mut depth = 0i32;
        let mut last_line = 1;
        let mut k = 0;
        while k < toks.len() {
            let t = toks[k];
            let statement_start = t.indent != u32::MAX && depth <= 0;
            if statement_start {
                depth = 0;
                while let Some(&(ind, d)) = open.last() {
                    if ind < t.indent {
                        break;
                    }
                    self.defs[d].end_line = last_line;
                    open.pop();
                }
                let kw = self.ident(k);
                let at = if kw == Some("async") && self.ident(k + 1) == Some("def") {
                    k + 1
                } else {
                    k
                };
                match (self.ident(at), self.ident(at + 1)) {
                    (Some(kw @ ("def" | "class")), Some(name)) => {
                        let kind = if kw == "def" { "function" } else { "class" };
                        let parent = open.last().map(|&(_, d)| d as u32);
                        let d = self.push_def(name, kind, t.line, parent);
                        // The header ends at the `:` outside brackets.
                        let mut j = at + 2;
                        let mut bracket = 0i32;
                        while j < toks.len() {
                            match toks[j].kind {
                                Kind::Punct(b'(' | b'[' | b'{') => bracket += 1,
                                Kind::Punct(b')' | b']' | b'}') => bracket -= 1,
                                Kind::Punct(b':') if bracket <= 0 => break,
                                _ => {}
                            }
                            if kw == "class" && bracket == 1 && toks[j].kind == Kind::Ident {
                                let after = toks.get(j + 1).map(|t| t.kind);
                                if matches!(after, Some(Kind::Punct(b',' | b')')))
                                    && toks[j - 1].kind != Kind::Punct(b'.')
                                    && toks[j - 1].kind != Kind::Punct(b'=')
                                {
                                    let base = self.word(j);
                                    self.add_ref(base);
                                }
                            }
                            j += 1;
                        }
                        let end = toks.get(j).map_or(self.text.len(), |t| t.end as usize);
                        self.defs[d].signature = self.signature(k, end);
                        self.defs[d].end_line = toks.get(j).map_or(t.line, |t| t.line);
                        last_line = self.defs[d].end_line;
                        open.push((t.indent, d));
                        k = j + 1;
                        continue;
                    }
                    (Some(name), _)
                        if t.indent == 0
                            && !PY_KEYWORDS.contains(&name)
                            && matches!(
                                toks.get(k + 1).map(|t| t.kind),
                                Some(Kind::Punct(b'=' | b':'))
                            ) =>
                    {
                        // A module-level `NAME = …` (or `NAME: T = …`) is a constant.
                        let d = self.push_def(name, "constant", t.line, None);
                        let line_end = self.text[t.start as usize..]
                            .find('\n')
                            .map_or(self.text.len(), |e| t.start as usize + e);
                        self.defs[d].signature = self.signature(k, line_end);
                        open.push((0, d));
                    }
                    _ => {}
                }
            }
            match t.kind {
                Kind::Punct(b'(' | b'[' | b'{') => depth += 1,
                Kind::Punct(b')' | b']' | b'}') => depth -= 1,
                Kind::Ident if self.is(k + 1, Kind::Punct(b'(')) => {
                    let name = self.word(k);
                    if !PY_KEYWORDS.contains(&name) {
                        self.add_ref(name);
                    }
                }
                _ => {}
            }
            last_line = t.end_line;
            k += 1;
        }
        for (_, d) in open {
            self.defs[d].end_line = last_line;
        }
    }

    /// A definition introduced by a keyword at `k`: its kind, the name's token, and what its
    /// body (if any) holds.
    fn keyword_def(
        &self,
        lang: Lang,
        k: usize,
        block: Block,
    ) -> Option<(&'static str, usize, Block)> {
        let kw = self.word(k);
        let prev = k.checked_sub(1).map(|p| self.toks[p].kind);
        // `x.fn`, `a::type` are not keywords here.
        if matches!(prev, Some(Kind::Punct(b'.') | Kind::Path)) {
            return None;
        }
        let name_at = |j: usize| self.is(j, Kind::Ident).then_some(j);
        match (lang, kw) {
            (Lang::Rust, "fn") => {
                let kind = if block == Block::Members {
                    "method"
                } else {
                    "function"
                };
                Some((kind, name_at(k + 1)?, Block::Code))
            }
            (Lang::Rust, "struct" | "enum" | "union" | "type") => {
                Some(("class", name_at(k + 1)?, Block::Code))
            }
            (Lang::Rust, "trait") => Some(("interface", name_at(k + 1)?, Block::Members)),
            (Lang::Rust, "mod") => Some(("module", name_at(k + 1)?, Block::Items)),
            (Lang::Rust, "macro_rules") if self.is(k + 1, Kind::Punct(b'!')) => {
                Some(("macro", name_at(k + 2)?, Block::Code))
            }
            (Lang::Go, "func") => {
                if self.is(k + 1, Kind::Punct(b'(')) {
                    let close = self.closing(k + 1);
                    let name = name_at(close + 1)?;
                    self.is(name + 1, Kind::Punct(b'('))
                        .then_some(("method", name, Block::Code))
                } else {
                    Some(("function", name_at(k + 1)?, Block::Code))
                }
            }
            (Lang::Go, "type") => Some(("type", name_at(k + 1)?, Block::Code)),
            (Lang::JavaScript | Lang::TypeScript | Lang::Tsx, "function") => {
                let j = if self.is(k + 1, Kind::Punct(b'*')) {
                    k + 2
                } else {
                    k + 1
                };
                Some(("function", name_at(j)?, Block::Code))
            }
            (Lang::JavaScript | Lang::TypeScript | Lang::Tsx | Lang::Java, "class") => {
                Some(("class", name_at(k + 1)?, Block::Members))
            }
            (Lang::TypeScript | Lang::Tsx | Lang::Java, "interface") => {
                Some(("interface", name_at(k + 1)?, Block::Members))
            }
            (Lang::TypeScript | Lang::Tsx, "namespace" | "module") => {
                Some(("module", name_at(k + 1)?, Block::Items))
            }
            (Lang::C | Lang::Cpp, "struct" | "class" | "union" | "enum") => {
                let name = name_at(k + 1)?;
                // A definition has a body: `struct s {` or `class c : public b {`.
                let mut j = name + 1;
                while j < self.toks.len() && j < name + 24 {
                    match self.toks[j].kind {
                        Kind::Punct(b'{') => {
                            let kind = if kw == "enum" { "type" } else { "class" };
                            return Some((kind, name, Block::Members));
                        }
                        Kind::Punct(b';' | b'(' | b')' | b'=' | b'*' | b'&' | b',') => return None,
                        _ => j += 1,
                    }
                }
                None
            }
            _ => None,
        }
    }

    /// Whether `name(` at `k` begins a function definition or declaration (`) {`, `) const {`,
    /// `) throws X {`, `);` outside code) rather than a call; returns the kind and the index of
    /// the token ending the header (`{` or `;`).
    fn call_shaped_def(&self, lang: Lang, k: usize, block: Block) -> Option<(&'static str, usize)> {
        if block == Block::Code || lang == Lang::Rust || lang == Lang::Go {
            return None;
        }
        if matches!(
            lang,
            Lang::JavaScript | Lang::TypeScript | Lang::Tsx | Lang::Java
        ) && block != Block::Members
        {
            return None;
        }
        let prev = k.checked_sub(1).map(|p| self.toks[p].kind);
        if matches!(
            prev,
            Some(Kind::Punct(
                b'.' | b'=' | b',' | b'(' | b'!' | b'?' | b'+' | b'-' | b'|'
            )) | Some(Kind::Arrow)
        ) {
            return None;
        }
        if let Some(p) = k.checked_sub(1).and_then(|p| self.ident(p)) {
            if matches!(
                p,
                "return" | "new" | "throw" | "await" | "yield" | "else" | "case"
            ) {
                return None;
            }
        }
        let close = self.closing(k + 1);
        let mut j = close + 1;
        while j < self.toks.len() && j < close + 40 {
            match self.toks[j].kind {
                Kind::Punct(b'{') => break,
                Kind::Punct(b';') => {
                    // A declaration (prototype, abstract or interface method); in JS a `;`
                    // after `)` is a call statement.
                    if matches!(lang, Lang::JavaScript) {
                        return None;
                    }
                    break;
                }
                Kind::Punct(b'=') if matches!(lang, Lang::C | Lang::Cpp) => {
                    // `= 0;`, `= default;`, `= delete;`
                    j += 1;
                }
                Kind::Ident | Kind::Path | Kind::Arrow => j += 1,
                Kind::Punct(
                    b':' | b'<' | b'>' | b'&' | b'*' | b',' | b'.' | b'[' | b']' | b'|',
                ) => j += 1,
                Kind::Punct(b'(') => j = self.closing(j) + 1,
                _ => return None,
            }
        }
        if j >= self.toks.len() {
            return None;
        }
        let kind = match lang {
            Lang::Cpp if prev == Some(Kind::Path) => "method",
            Lang::C | Lang::Cpp => "function",
            _ => "method",
        };
        Some((kind, j))
    }

    fn braces(&mut self, lang: Lang) {
        let toks = self.toks;
        let is_js = matches!(lang, Lang::JavaScript | Lang::TypeScript | Lang::Tsx);
        // Open blocks: what they hold and the definition whose body they are.
        let mut blocks: Vec<(Block, Option<usize>)> = Vec::new();
        // A definition whose body `{` has not been seen yet, with the paren depth it was made at.
        let mut pending: Option<(Option<usize>, Block, i32)> = None;
        let mut typedef: Option<usize> = None;
        let mut parens = 0i32;
        let mut k = 0;
        while k < toks.len() {
            let t = toks[k];
            let block = blocks.last().map_or(Block::Items, |b| b.0);
            let parent = blocks.iter().rev().find_map(|b| b.1).map(|d| d as u32);
            match t.kind {
                Kind::Punct(b'(' | b'[') => parens += 1,
                Kind::Punct(b')' | b']') => parens -= 1,
                Kind::Punct(b'{') => match pending.take() {
                    Some((def, inner, at)) if at == parens => {
                        if let Some(d) = def {
                            let sig = self.defs[d].signature.clone();
                            if sig.is_empty() {
                                let from = self.statement_start(k, d);
                                self.defs[d].signature = self.signature(from, t.start as usize);
                            }
                        }
                        blocks.push((inner, def));
                    }
                    other => {
                        pending = other;
                        blocks.push((Block::Code, None));
                    }
                },
                Kind::Punct(b'}') => {
                    if let Some((_, Some(d))) = blocks.pop() {
                        self.defs[d].end_line = t.line;
                    }
                }
                Kind::Punct(b';') => {
                    if let Some((def, _, at)) = pending {
                        if at == parens {
                            if let Some(d) = def {
                                self.defs[d].end_line = t.line;
                                if self.defs[d].signature.is_empty() {
                                    let from = self.statement_start(k, d);
                                    self.defs[d].signature = self.signature(from, t.start as usize);
                                }
                            }
                            pending = None;
                        }
                    }
                    if let Some(start) = typedef.take() {
                        if let Some(name) = k.checked_sub(1).and_then(|p| self.ident(p)) {
                            let d = self.push_def(name, "type", toks[start].line, parent);
                            self.defs[d].end_line = t.line;
                            self.defs[d].signature = self.signature(start, t.start as usize);
                        }
                    }
                }
                Kind::Ident => {
                    let word = self.word(k);
                    if let Some((kind, name, inner)) = self.keyword_def(lang, k, block) {
                        let name_str = self.word(name);
                        let d = self.push_def(name_str, kind, toks[k].line, parent);
                        pending = Some((Some(d), inner, parens));
                        k = name + 1;
                        continue;
                    }
                    match (lang, word) {
                        (Lang::C | Lang::Cpp, "typedef") => typedef = Some(k),
                        (Lang::C | Lang::Cpp, "namespace") | (Lang::Cpp, "extern") => {
                            pending = Some((None, Block::Items, parens));
                        }
                        (Lang::Rust, "impl") => {
                            // `impl<T> Trait for Type {`: the trait and the type are referenced.
                            let mut j = k + 1;
                            if self.is(j, Kind::Punct(b'<')) {
                                j = self.closing(j) + 1;
                            }
                            while j < toks.len() && !self.is(j, Kind::Punct(b'{')) && j < k + 40 {
                                if self.is(j, Kind::Ident)
                                    && !matches!(self.word(j), "for" | "where" | "dyn")
                                    && !self.is(j + 1, Kind::Path)
                                    && !self.is(j.wrapping_sub(1), Kind::Path)
                                {
                                    let name = self.word(j);
                                    self.add_ref(name);
                                    if self.is(j + 1, Kind::Punct(b'<')) {
                                        j = self.closing(j + 1);
                                    }
                                }
                                if self.is(j, Kind::Punct(b';')) {
                                    break;
                                }
                                j += 1;
                            }
                            pending = Some((None, Block::Members, parens));
                            k = j;
                            continue;
                        }
                        (Lang::Java, "enum" | "record") if self.is(k + 1, Kind::Ident) => {
                            pending = Some((None, Block::Members, parens));
                        }
                        (Lang::Java, "extends" | "implements") | (_, "new") => {
                            let mut j = k + 1;
                            while let Some(name) = self.ident(j) {
                                self.add_ref(name);
                                if !self.is(j + 1, Kind::Punct(b',')) || word == "new" {
                                    break;
                                }
                                j += 2;
                            }
                        }
                        _ => {}
                    }
                    if is_js
                        && matches!(word, "const" | "let" | "var")
                        && self.is(k + 1, Kind::Ident)
                        && self.is(k + 2, Kind::Punct(b'='))
                        && self.is_function_value(k + 3)
                    {
                        let name = self.word(k + 1);
                        let d = self.push_def(name, "function", t.line, parent);
                        pending = Some((Some(d), Block::Code, parens));
                        k += 3;
                        continue;
                    }
                    if self.is(k + 1, Kind::Punct(b'(')) {
                        if let Some((kind, _)) = self.call_shaped_def(lang, k, block) {
                            if is_js && word == "constructor" {
                                // A body, but not a definition (tree-sitter's JS tags skip it).
                                pending = Some((None, Block::Code, parens));
                            } else if !C_KEYWORDS.contains(&word) {
                                let d = self.push_def(word, kind, t.line, parent);
                                pending = Some((Some(d), Block::Code, parens));
                            }
                        } else if !C_KEYWORDS.contains(&word) {
                            self.add_ref(word);
                        }
                    } else if lang == Lang::Rust
                        && self.is(k + 1, Kind::Punct(b'!'))
                        && word != "macro_rules"
                    {
                        self.add_ref(word);
                    }
                }
                _ => {}
            }
            k += 1;
        }
    }

    /// A JS value that is a function: `function…`, `async …`, `(…) =>`, `x =>`.
    fn is_function_value(&self, k: usize) -> bool {
        let k = if self.ident(k) == Some("async") {
            k + 1
        } else {
            k
        };
        match self.toks.get(k).map(|t| t.kind) {
            Some(Kind::Ident) => self.word(k) == "function" || self.is(k + 1, Kind::Arrow),
            Some(Kind::Punct(b'(')) => {
                let close = self.closing(k);
                // `(a, b) =>` or `(a): T =>`
                (close + 1..(close + 8).min(self.toks.len()))
                    .take_while(|&j| {
                        !self.is(j, Kind::Punct(b'{')) && !self.is(j, Kind::Punct(b';'))
                    })
                    .any(|j| self.is(j, Kind::Arrow))
            }
            _ => false,
        }
    }

    /// Where the statement holding token `k` starts: after the previous `;`, `{` or `}`, but not
    /// before the line of the definition `d`.
    fn statement_start(&self, k: usize, d: usize) -> usize {
        let line = self.defs[d].line;
        let mut j = k;
        while j > 0 {
            let p = &self.toks[j - 1];
            if matches!(p.kind, Kind::Punct(b';' | b'{' | b'}')) || p.line < line {
                break;
            }
            j -= 1;
        }
        j
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn names(refs: &crate::facts::WordCounts) -> Vec<String> {
        refs.iter().map(|(w, _)| w.to_string()).collect()
    }

    fn defs(lang: Lang, text: &str) -> Vec<(String, String, u32, u32, Option<u32>)> {
        scan(lang, text)
            .defs
            .into_iter()
            .map(|d| (d.name, d.kind, d.line, d.end_line, d.parent))
            .collect()
    }

    fn s(
        name: &str,
        kind: &str,
        line: u32,
        end: u32,
        parent: Option<u32>,
    ) -> (String, String, u32, u32, Option<u32>) {
        (name.into(), kind.into(), line, end, parent)
    }

    #[test]
    fn python_defs_nest_by_indentation_and_skip_strings_and_comments() {
        let text = "X = 1\nclass A(Base, mod.Other):\n    \"\"\"Doc\n    def not_a_def():\n    \"\"\"\n    def f(self,\n          y):\n        # def g(): comment\n        return helper(y)\n\n\nasync def top():\n    pass\n";
        assert_eq!(
            defs(Lang::Python, text),
            vec![
                s("X", "constant", 1, 1, None),
                s("A", "class", 2, 9, None),
                s("f", "function", 6, 9, Some(1)),
                s("top", "function", 12, 13, None),
            ]
        );
        let sy = scan(Lang::Python, text);
        assert_eq!(sy.defs[2].signature, "def f(self, y):");
        assert_eq!(names(&sy.refs), vec!["Base", "helper"]);
    }

    #[test]
    fn brace_languages_find_functions_methods_and_types_not_calls() {
        let rust = "/// doc\npub struct P { x: u32 }\nimpl Display for P {\n    fn fmt(&self) -> String { format!(\"{}\", helper(1)) }\n}\nfn helper(x: u32) -> u32 { let s = 'a'; x }\n";
        assert_eq!(
            defs(Lang::Rust, rust),
            vec![
                s("P", "class", 2, 2, None),
                s("fmt", "method", 4, 4, None),
                s("helper", "function", 6, 6, None),
            ]
        );
        let refs: Vec<String> = names(&scan(Lang::Rust, rust).refs);
        assert_eq!(refs, vec!["Display", "P", "format", "helper"]);

        let c = "#include <x.h>\nstatic int add(int a, int b);\nstruct point { int x; };\ntypedef struct point point_t;\nint add(int a, int b) {\n  if (a) { return mul(a, b); }\n  return 0;\n}\n";
        assert_eq!(
            defs(Lang::C, c),
            vec![
                s("add", "function", 2, 2, None),
                s("point", "class", 3, 3, None),
                s("point_t", "type", 4, 4, None),
                s("add", "function", 5, 8, None),
            ]
        );
        assert_eq!(scan(Lang::C, c).defs[3].signature, "int add(int a, int b)");

        let java = "class App extends Base {\n  public void run() throws IOException {\n    new Tool().apply(x);\n  }\n}\n";
        assert_eq!(
            defs(Lang::Java, java),
            vec![
                s("App", "class", 1, 5, None),
                s("run", "method", 2, 4, Some(0))
            ]
        );
        let refs: Vec<String> = names(&scan(Lang::Java, java).refs);
        assert_eq!(refs, vec!["Base", "Tool", "apply"]);

        let js = "const f = async (a) => { return g(a); };\nclass C {\n  constructor() { this.x = 1; }\n  get(k) { return `${k}`; }\n}\nfunction* gen() {}\n";
        assert_eq!(
            defs(Lang::JavaScript, js),
            vec![
                s("f", "function", 1, 1, None),
                s("C", "class", 2, 5, None),
                s("get", "method", 4, 4, Some(1)),
                s("gen", "function", 6, 6, None),
            ]
        );

        let go = "package m\n\n// R reverses.\nfunc R(s string) string { return strings.ToUpper(s) }\n\ntype Box struct{}\n\nfunc (b *Box) Open() { f := func(x int) {}; f(1) }\n";
        assert_eq!(
            defs(Lang::Go, go),
            vec![
                s("R", "function", 4, 4, None),
                s("Box", "type", 6, 6, None),
                s("Open", "method", 8, 8, None),
            ]
        );
    }
}
