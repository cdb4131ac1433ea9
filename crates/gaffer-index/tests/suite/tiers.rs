//! The two tiers: a full index scans tokens (ctags-like); tree-sitter runs lazily on the files a
//! ranking selects, cached by content hash.

use std::collections::BTreeMap;

use gaffer_index::{
    build_index, fit, parse_and_fit, rank, FileGraph, IndexOptions, MemoryCache, PackOptions,
    Tokenizer, TokenizerKind, Weights,
};
use pretty_assertions::assert_eq;

use super::support::*;

/// Fixtures in every parsed language, written the way real code is.
fn polyglot() -> Repo {
    Repo::new(&[
        (
            "py/models.py",
            "import os\n\nDEFAULT = 3\n\n\nclass Session(Base):\n    \"\"\"A session.\n\n    def example(): not code\n    \"\"\"\n\n    def send(self, request,\n             timeout=None):\n        # helper() in a comment\n        return helper(request)\n\n    @property\n    def size(self):\n        return len(self.items)\n\n\nasync def helper(x):\n    s = f\"{x}\" + 'def nope():'\n    return s\n",
        ),
        (
            "rs/parser.rs",
            "use std::fmt;\n\n/// Parses things.\npub struct Parser<'a> {\n    src: &'a str,\n}\n\npub enum Token { Word, Num }\n\npub trait Lex {\n    fn lex(&self) -> Vec<Token> { Vec::new() }\n}\n\nimpl<'a> Parser<'a> {\n    pub fn new(src: &'a str) -> Self {\n        let quote = '\"';\n        Parser { src }\n    }\n\n    fn parse(&self) -> u32 {\n        helper(self.src.len())\n    }\n}\n\nfn helper(n: usize) -> u32 {\n    println!(\"fn not_a_fn() {{}}\");\n    n as u32\n}\n\nmacro_rules! twice { ($e:expr) => { $e * 2 }; }\n\nmod inner {\n    pub fn deep() {}\n}\n",
        ),
        (
            "go/box.go",
            "package box\n\nimport \"fmt\"\n\n// Box holds a value.\ntype Box struct {\n\tv int\n}\n\n// New makes a box.\nfunc New(v int) *Box {\n\treturn &Box{v: v}\n}\n\nfunc (b *Box) String() string {\n\tf := func(x int) int { return x }\n\treturn fmt.Sprintf(\"%d\", f(b.v))\n}\n",
        ),
        (
            "js/cart.js",
            "import { util } from './util';\n\nexport function total(items) {\n  return items.reduce((a, b) => a + b, 0);\n}\n\nexport class Cart {\n  constructor() { this.items = []; }\n  add(item) { this.items.push(item); return total(this.items); }\n}\n\nconst fmt = (x) => `${x} items`;\n",
        ),
        (
            "ts/store.ts",
            "export interface Item { id: number }\n\nexport class Store {\n  get(id: number): Item | undefined { return undefined; }\n}\n\nexport function load(path: string): Store { return new Store(); }\n",
        ),
        (
            "java/App.java",
            "package ex;\n\npublic class App extends Base {\n    public static void main(String[] args) throws Exception {\n        new App().run(\"x\");\n    }\n\n    void run(String s) {\n        if (s.isEmpty()) { return; }\n    }\n}\n",
        ),
        (
            "c/util.c",
            "#include \"util.h\"\n\nstruct point { int x; int y; };\n\ntypedef struct point point_t;\n\nstatic int add(int a, int b);\n\nint add(int a, int b) {\n  /* add(1, 2) in a comment */\n  return mul(a, b);\n}\n",
        ),
        (
            "cpp/widget.cpp",
            "#include \"util.h\"\n\nclass Widget : public Base {\npublic:\n  int size() const { return 1; }\n};\n\nint Widget::area() const {\n  return size() * 2;\n}\n\nint free_fn(int x) { return add(x, 1); }\n",
        ),
    ])
}

/// `path:name@line` → kind, over every definition of the index.
fn defs_of(index: &gaffer_index::Index) -> BTreeMap<String, String> {
    index
        .files
        .iter()
        .flat_map(|f| {
            f.facts
                .defs
                .iter()
                .map(|d| (format!("{}:{}@{}", f.path, d.name, d.line), d.kind.clone()))
        })
        .collect()
}

#[test]
fn the_scanner_finds_the_definitions_tree_sitter_finds() {
    let repo = polyglot();
    let scanned = repo.scanned();
    let parsed = repo.index();
    assert!(scanned.files.iter().all(|f| !f.facts.parsed));
    assert!(parsed
        .files
        .iter()
        .all(|f| f.facts.parsed || !f.lang.is_code()));
    let (mut s, p) = (defs_of(&scanned), defs_of(&parsed));
    assert!(
        p.len() >= 30,
        "the fixtures define enough to compare: {p:?}"
    );
    // The one difference: Rust's tags query calls every `fn` in a `{}` item list a method,
    // including a module's; the scanner calls it a function.
    assert_eq!(
        s.insert("rs/parser.rs:deep@33".into(), "method".into()),
        Some("function".into())
    );
    assert_eq!(s, p);
}

#[test]
fn the_scanner_finds_calls_outside_strings_and_comments() {
    let index = polyglot().scanned();
    let refs_of = |p: &str| refs(&index, p);
    assert!(refs_of("py/models.py").contains(&"helper".to_string()));
    assert!(refs_of("py/models.py").contains(&"Base".to_string()));
    assert!(!refs_of("py/models.py").contains(&"example".to_string()));
    assert!(!refs_of("rs/parser.rs").contains(&"not_a_fn".to_string()));
    assert!(refs_of("rs/parser.rs").contains(&"helper".to_string()));
    assert!(refs_of("c/util.c").contains(&"mul".to_string()));
    assert!(refs_of("java/App.java").contains(&"run".to_string()));
    assert!(refs_of("js/cart.js").contains(&"total".to_string()));
    assert!(refs_of("go/box.go").contains(&"Sprintf".to_string()));
    let models = file(&index, "py/models.py");
    let send = models.facts.defs.iter().find(|d| d.name == "send").unwrap();
    let parent = send
        .parent
        .map(|p| models.facts.defs[p as usize].name.as_str());
    assert_eq!(
        (send.line, send.end_line, parent),
        (12, 15, Some("Session"))
    );
}

#[test]
fn symbols_are_parsed_once_per_content_and_only_for_the_files_asked() {
    let repo = polyglot();
    let cache = MemoryCache::new();
    let mut index = build_index(repo.path(), &cache, &IndexOptions::default()).unwrap();
    let models = pos(&index, "py/models.py");
    let parser = pos(&index, "rs/parser.rs");
    assert_eq!(index.parse_symbols(&[models, models], &cache).unwrap(), 1);
    assert!(index.files[models].facts.parsed);
    assert!(!index.files[parser].facts.parsed, "only the files asked");
    let session = file(&index, "py/models.py")
        .facts
        .defs
        .iter()
        .find(|d| d.name == "Session")
        .unwrap();
    assert_eq!(session.doc.as_deref(), Some("A session."));
    // A new process (a new index over the same cache) finds them cached: nothing parsed.
    let mut again = build_index(repo.path(), &cache, &IndexOptions::default()).unwrap();
    assert_eq!(again.parse_symbols(&[models], &cache).unwrap(), 0);
    assert_eq!(again.files[models].facts, index.files[models].facts);
    // Asking again for a parsed file does nothing.
    assert_eq!(again.parse_symbols(&[models], &cache).unwrap(), 0);
}

#[test]
fn a_file_changed_after_indexing_keeps_its_scanned_symbols() {
    let repo = polyglot();
    let cache = MemoryCache::new();
    let mut index = build_index(repo.path(), &cache, &IndexOptions::default()).unwrap();
    let models = pos(&index, "py/models.py");
    let before = index.files[models].facts.clone();
    repo.write("py/models.py", b"def other():\n    pass\n");
    assert_eq!(index.parse_symbols(&[models], &cache).unwrap(), 0);
    assert_eq!(index.files[models].facts, before);
}

#[test]
fn refreshing_an_index_in_memory_extracts_only_the_changed_file_and_keeps_parsed_symbols() {
    let repo = polyglot();
    let cache = MemoryCache::new();
    let mut index = build_index(repo.path(), &cache, &IndexOptions::default()).unwrap();
    let models = pos(&index, "py/models.py");
    index.parse_symbols(&[models], &cache).unwrap();
    repo.write("go/box.go", b"package box\n\nfunc Renamed() {}\n");
    repo.write("new.py", b"def fresh():\n    pass\n");
    let report = index.refresh(&cache, &IndexOptions::default()).unwrap();
    assert_eq!(
        report.parsed, 2,
        "the changed and the new file, nothing else"
    );
    // The unchanged file kept its tree-sitter symbols from memory (the cache holds only the
    // scanned facts under its content key).
    assert!(file(&index, "py/models.py").facts.parsed);
    assert!(has_def(&index, "go/box.go", "Renamed", "function"));
    assert!(!has_def(&index, "go/box.go", "New", "function"));
    assert!(has_def(&index, "new.py", "fresh", "function"));
    // The same as a build from scratch, apart from the symbols parsed in memory.
    let fresh = build_index(repo.path(), &MemoryCache::new(), &IndexOptions::default()).unwrap();
    let paths =
        |i: &gaffer_index::Index| i.files.iter().map(|f| f.path.clone()).collect::<Vec<_>>();
    assert_eq!(paths(&index), paths(&fresh));
    for (a, b) in index.files.iter().zip(&fresh.files) {
        if a.path != "py/models.py" {
            assert_eq!(a.facts, b.facts, "{}", a.path);
        }
    }
    // A deleted file leaves the index.
    std::fs::remove_file(repo.path().join("new.py")).unwrap();
    let report = index.refresh(&cache, &IndexOptions::default()).unwrap();
    assert_eq!(report.parsed, 0);
    assert!(!paths(&index).contains(&"new.py".to_string()));
}

#[test]
fn a_graph_updated_after_a_change_equals_one_built_from_scratch() {
    let repo = Repo::new(&[
        ("pkg/__init__.py", ""),
        (
            "pkg/a.py",
            "from .b import helper\n\ndef run():\n    return helper(1) + shared()\n",
        ),
        (
            "pkg/b.py",
            "def helper(x):\n    return x\n\ndef shared():\n    return 0\n",
        ),
        ("pkg/c.py", "def caller():\n    return moved() + shared()\n"),
        ("pkg/d.py", "def other():\n    return 2\n"),
    ]);
    let cache = MemoryCache::new();
    let mut index = build_index(repo.path(), &cache, &IndexOptions::default()).unwrap();
    let mut graph = FileGraph::build(&index);
    // `moved` appears in d.py, `shared` leaves b.py: c.py's edges change though c.py did not.
    repo.write(
        "pkg/d.py",
        b"def other():\n    return 2\n\ndef moved():\n    return 3\n\ndef shared():\n    return 1\n",
    );
    repo.write("pkg/b.py", b"def helper(x):\n    return x\n");
    let report = index.refresh(&cache, &IndexOptions::default()).unwrap();
    assert_eq!(report.changed, vec!["pkg/b.py", "pkg/d.py"]);
    let c = pos(&index, "pkg/c.py");
    let d = pos(&index, "pkg/d.py");
    assert!(!graph.out[c].iter().any(|e| e.to == d));
    graph.update(&index, &report.changed);
    assert!(
        graph.out[c].iter().any(|e| e.to == d),
        "c.py now uses names d.py defines"
    );
    assert_eq!(graph, FileGraph::build(&index));
    // A new file changes the file list: the update builds the graph again.
    repo.write("pkg/e.py", b"from .d import moved\n");
    let report = index.refresh(&cache, &IndexOptions::default()).unwrap();
    assert_eq!(report.changed, vec!["pkg/e.py"]);
    graph.update(&index, &report.changed);
    assert_eq!(graph, FileGraph::build(&index));
}

#[test]
fn the_fit_parses_only_the_candidates_its_budget_reaches_and_selects_the_same() {
    let files: Vec<(String, String)> = (0..80)
        .map(|i| {
            (
                format!("pkg/widget_{i}.py"),
                format!(
                    "def render_widget_{i}(frame):\n    \"\"\"Render widget {i}.\"\"\"\n    return frame\n\n\nclass Widget{i}:\n    def draw(self):\n        return render_widget_{i}(self)\n"
                ),
            )
        })
        .collect();
    let refs: Vec<(&str, &str)> = files
        .iter()
        .map(|(p, c)| (p.as_str(), c.as_str()))
        .collect();
    let repo = Repo::new(&refs);
    let tok = Tokenizer::load(TokenizerKind::Cl100k).unwrap();
    let opts = PackOptions {
        budget: 700,
        ..PackOptions::default()
    };
    let cache = MemoryCache::new();
    let mut index = build_index(repo.path(), &cache, &IndexOptions::default()).unwrap();
    let graph = FileGraph::build(&index);
    let ranked = rank(
        &index,
        &graph,
        "render widget draws the frame",
        &Weights::default(),
    );
    assert!(ranked.len() >= 80);
    let lazy = parse_and_fit(&mut index, &ranked, &opts, &tok, &cache).unwrap();
    let parsed = index.files.iter().filter(|f| f.facts.parsed).count();
    assert!(parsed < 80, "parsed {parsed} files for a 700-token budget");
    assert!(lazy.used <= 700 && !lazy.files.is_empty());
    // The same selection as parsing every candidate first.
    let mut eager = build_index(repo.path(), &cache, &IndexOptions::default()).unwrap();
    let all: Vec<usize> = ranked.iter().map(|r| r.file).collect();
    eager.parse_symbols(&all, &cache).unwrap();
    let full = fit(&eager, &ranked, &opts, &tok);
    let show = |s: &gaffer_index::Selection| {
        s.files
            .iter()
            .map(|e| (e.path.clone(), e.tokens, e.text.clone()))
            .collect::<Vec<_>>()
    };
    assert_eq!(show(&lazy), show(&full));
    // Full files and skeletons show tree-sitter's signatures; the listing, top-level names.
    assert!(
        lazy.files.iter().all(|e| e.text.contains("def ")
            || e.text.contains("class ")
            || e.text
                .lines()
                .nth(1)
                .is_some_and(|l| l.starts_with("render_widget_"))),
        "{lazy:?}"
    );
}
