//! Languages: detection by file name and the tree-sitter grammars with their tags queries.

use std::path::Path;
use std::sync::OnceLock;

use serde::{Deserialize, Serialize};
use tree_sitter::{Language, Query};

/// The language of an indexed file. `Text` files are indexed lexically only.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Lang {
    /// Python.
    Python,
    /// Rust.
    Rust,
    /// JavaScript (and JSX).
    JavaScript,
    /// TypeScript.
    TypeScript,
    /// TSX.
    Tsx,
    /// Go.
    Go,
    /// Java.
    Java,
    /// C.
    C,
    /// C++.
    Cpp,
    /// Any other text file (docs, config): words only.
    Text,
}

const ALL_PARSED: [Lang; 9] = [
    Lang::Python,
    Lang::Rust,
    Lang::JavaScript,
    Lang::TypeScript,
    Lang::Tsx,
    Lang::Go,
    Lang::Java,
    Lang::C,
    Lang::Cpp,
];

/// Extensions of text files worth indexing lexically.
const TEXT_EXTS: &[&str] = &[
    "md", "rst", "txt", "toml", "yaml", "yml", "json", "cfg", "ini", "html", "css", "scss", "sh",
    "bash", "rb", "php", "kt", "kts", "scala", "swift", "cs", "lua", "sql", "proto", "xml",
    "gradle", "cmake", "mk", "pyi", "pyx", "pxd", "m", "mm", "r", "ex", "exs", "erl", "hs", "ml",
    "vue", "svelte", "zig", "nim", "dart",
];

/// Extensions that are never text (skipped without reading).
const BINARY_EXTS: &[&str] = &[
    "png", "jpg", "jpeg", "gif", "bmp", "ico", "webp", "pdf", "zip", "gz", "tgz", "bz2", "xz",
    "zst", "7z", "tar", "jar", "class", "so", "dylib", "dll", "exe", "o", "a", "lib", "pyc", "pyo",
    "whl", "egg", "woff", "woff2", "ttf", "otf", "eot", "mp3", "mp4", "wav", "ogg", "mov", "avi",
    "nc", "h5", "hdf5", "npy", "npz", "pkl", "pickle", "db", "sqlite", "bin", "dat", "grib",
    "parquet", "feather", "svgz", "psd", "xlsx", "docx",
];

impl Lang {
    /// A short stable tag (used in cache keys and output).
    pub fn tag(self) -> &'static str {
        match self {
            Lang::Python => "python",
            Lang::Rust => "rust",
            Lang::JavaScript => "javascript",
            Lang::TypeScript => "typescript",
            Lang::Tsx => "tsx",
            Lang::Go => "go",
            Lang::Java => "java",
            Lang::C => "c",
            Lang::Cpp => "cpp",
            Lang::Text => "text",
        }
    }

    /// Whether the file is source code (parsed with tree-sitter).
    pub fn is_code(self) -> bool {
        self != Lang::Text
    }

    /// The language of `path` by extension: `Some(Text)` for known text, `None` for known binary
    /// and `Some(Text)` for unknown extensions (the caller then checks the bytes).
    pub fn detect(path: &Path) -> Option<Lang> {
        let ext = path
            .extension()
            .and_then(|e| e.to_str())
            .unwrap_or("")
            .to_ascii_lowercase();
        let lang = match ext.as_str() {
            "py" => Lang::Python,
            "rs" => Lang::Rust,
            "js" | "jsx" | "mjs" | "cjs" => Lang::JavaScript,
            "ts" | "mts" | "cts" => Lang::TypeScript,
            "tsx" => Lang::Tsx,
            "go" => Lang::Go,
            "java" => Lang::Java,
            "c" => Lang::C,
            "h" | "cc" | "cpp" | "cxx" | "c++" | "hpp" | "hh" | "hxx" | "h++" | "ipp" => Lang::Cpp,
            e if BINARY_EXTS.contains(&e) => return None,
            _ => Lang::Text,
        };
        Some(lang)
    }

    /// Whether the extension is one of the known text kinds (as opposed to unknown).
    pub fn known_text_ext(path: &Path) -> bool {
        let ext = path
            .extension()
            .and_then(|e| e.to_str())
            .unwrap_or("")
            .to_ascii_lowercase();
        TEXT_EXTS.contains(&ext.as_str())
    }

    /// All languages with a grammar.
    pub fn parsed() -> &'static [Lang] {
        &ALL_PARSED
    }

    fn slot(self) -> usize {
        ALL_PARSED.iter().position(|l| *l == self).unwrap_or(0)
    }
}

/// A grammar and its compiled tags query.
pub struct Grammar {
    /// The tree-sitter language.
    pub language: Language,
    /// The tags query (definitions and references).
    pub tags: Query,
}

static GRAMMARS: [OnceLock<Option<Grammar>>; 9] = [
    OnceLock::new(),
    OnceLock::new(),
    OnceLock::new(),
    OnceLock::new(),
    OnceLock::new(),
    OnceLock::new(),
    OnceLock::new(),
    OnceLock::new(),
    OnceLock::new(),
];

/// Extra patterns of ours appended to a grammar's own tags query (tried first; dropped if the
/// combination does not compile).
fn extra_tags(lang: Lang) -> &'static str {
    match lang {
        Lang::Python => {
            "(class_definition superclasses: (argument_list (identifier) @name) @reference.class)\n"
        }
        Lang::Go => "(type_spec name: (type_identifier) @name) @definition.type\n",
        Lang::C => "(call_expression function: (identifier) @name) @reference.call\n",
        Lang::Cpp => {
            "(call_expression function: (identifier) @name) @reference.call\n\
             (call_expression function: (field_expression field: (field_identifier) @name)) @reference.call\n"
        }
        _ => "",
    }
}

fn load(lang: Lang) -> Option<Grammar> {
    let (language, own, base): (Language, &str, &str) = match lang {
        Lang::Python => (
            tree_sitter_python::LANGUAGE.into(),
            tree_sitter_python::TAGS_QUERY,
            "",
        ),
        Lang::Rust => (
            tree_sitter_rust::LANGUAGE.into(),
            tree_sitter_rust::TAGS_QUERY,
            "",
        ),
        Lang::JavaScript => (
            tree_sitter_javascript::LANGUAGE.into(),
            tree_sitter_javascript::TAGS_QUERY,
            "",
        ),
        Lang::TypeScript => (
            tree_sitter_typescript::LANGUAGE_TYPESCRIPT.into(),
            tree_sitter_typescript::TAGS_QUERY,
            tree_sitter_javascript::TAGS_QUERY,
        ),
        Lang::Tsx => (
            tree_sitter_typescript::LANGUAGE_TSX.into(),
            tree_sitter_typescript::TAGS_QUERY,
            tree_sitter_javascript::TAGS_QUERY,
        ),
        Lang::Go => (
            tree_sitter_go::LANGUAGE.into(),
            tree_sitter_go::TAGS_QUERY,
            "",
        ),
        Lang::Java => (
            tree_sitter_java::LANGUAGE.into(),
            tree_sitter_java::TAGS_QUERY,
            "",
        ),
        Lang::C => (
            tree_sitter_c::LANGUAGE.into(),
            tree_sitter_c::TAGS_QUERY,
            "",
        ),
        Lang::Cpp => (
            tree_sitter_cpp::LANGUAGE.into(),
            tree_sitter_cpp::TAGS_QUERY,
            tree_sitter_c::TAGS_QUERY,
        ),
        Lang::Text => return None,
    };
    let extra = extra_tags(lang);
    let candidates = [
        format!("{own}\n{base}\n{extra}"),
        format!("{own}\n{base}"),
        format!("{own}\n{extra}"),
        own.to_string(),
    ];
    for source in candidates {
        if let Ok(tags) = Query::new(&language, &source) {
            return Some(Grammar { language, tags });
        }
    }
    None
}

/// The grammar of `lang`, compiled on first use; `None` for `Text` or if the query fails.
pub fn grammar(lang: Lang) -> Option<&'static Grammar> {
    if !lang.is_code() {
        return None;
    }
    GRAMMARS[lang.slot()].get_or_init(|| load(lang)).as_ref()
}
