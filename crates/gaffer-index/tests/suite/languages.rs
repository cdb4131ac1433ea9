//! Definitions, references and imports per language.

use gaffer_index::FileGraph;
use pretty_assertions::assert_eq;

use super::support::*;

#[test]
fn python_definitions_references_docs_and_imports() {
    let repo = Repo::new(&[
        ("pkg/__init__.py", "from .models import Session\n"),
        (
            "pkg/models.py",
            "class Session:\n    \"\"\"A session.\n\n    More text.\"\"\"\n\n    def send(self, request,\n             timeout=None):\n        return helper(request)\n\n\ndef helper(x):\n    # a comment before the body\n    return x\n",
        ),
        ("pkg/api.py", "import pkg.util\nfrom .models import Session\n\ndef get(url):\n    return Session().send(url)\n"),
        ("pkg/util.py", "def quote(s):\n    return s\n"),
    ]);
    let index = repo.index();
    assert!(has_def(&index, "pkg/models.py", "Session", "class"));
    assert!(has_def(&index, "pkg/models.py", "helper", "function"));
    let models = file(&index, "pkg/models.py");
    let send = models.facts.defs.iter().find(|d| d.name == "send").unwrap();
    assert_eq!(send.signature, "def send(self, request, timeout=None):");
    assert_eq!((send.line, send.end_line), (6, 8));
    let helper = models
        .facts
        .defs
        .iter()
        .find(|d| d.name == "helper")
        .unwrap();
    assert_eq!(helper.signature, "def helper(x):");
    let parent = send
        .parent
        .map(|p| models.facts.defs[p as usize].name.clone());
    assert_eq!(parent.as_deref(), Some("Session"));
    let session = models
        .facts
        .defs
        .iter()
        .find(|d| d.name == "Session")
        .unwrap();
    assert_eq!(session.doc.as_deref(), Some("A session."));
    assert!(refs(&index, "pkg/api.py").contains(&"send".to_string()));
    assert!(refs(&index, "pkg/models.py").contains(&"helper".to_string()));
    let graph = FileGraph::build(&index);
    assert_eq!(
        imports_of(&index, &graph, "pkg/api.py"),
        vec!["pkg/models.py", "pkg/util.py"]
    );
    assert_eq!(
        imports_of(&index, &graph, "pkg/__init__.py"),
        vec!["pkg/models.py"]
    );
}

#[test]
fn rust_definitions_docs_and_module_imports() {
    let repo = Repo::new(&[
        ("Cargo.toml", "[package]\nname = \"x\"\n"),
        ("src/lib.rs", "mod parser;\nuse crate::parser::Parser;\n\npub fn run() { Parser::new().parse(); }\n"),
        (
            "src/parser.rs",
            "/// Parses things.\npub struct Parser;\n\nimpl Parser {\n    pub fn new() -> Self { Parser }\n    pub fn parse(&self) -> u32 { 1 }\n}\n",
        ),
    ]);
    let index = repo.index();
    assert!(has_def(&index, "src/parser.rs", "Parser", "class"));
    assert!(has_def(&index, "src/parser.rs", "parse", "method"));
    assert!(has_def(&index, "src/lib.rs", "run", "function"));
    let parser = file(&index, "src/parser.rs")
        .facts
        .defs
        .iter()
        .find(|d| d.name == "Parser")
        .unwrap();
    assert_eq!(parser.doc.as_deref(), Some("Parses things."));
    let parse = file(&index, "src/parser.rs")
        .facts
        .defs
        .iter()
        .find(|d| d.name == "parse")
        .unwrap();
    assert_eq!(parse.signature, "pub fn parse(&self) -> u32");
    assert!(refs(&index, "src/lib.rs").contains(&"parse".to_string()));
    let graph = FileGraph::build(&index);
    assert_eq!(
        imports_of(&index, &graph, "src/lib.rs"),
        vec!["src/parser.rs"]
    );
}

#[test]
fn javascript_and_typescript_definitions_and_relative_imports() {
    let repo = Repo::new(&[
        ("src/app.js", "import { total } from './cart';\nconst lib = require('./lib/index.js');\nfunction main() { return total([1]); }\n"),
        ("src/cart.ts", "export function total(items: number[]): number { return items.length; }\nexport class Cart { add(x: number) {} }\n"),
        ("src/lib/index.js", "class Store { get(key) { return key; } }\nmodule.exports = Store;\n"),
        ("src/view.tsx", "import { Cart } from './cart';\nexport function View() { return <div/>; }\n"),
    ]);
    let index = repo.index();
    assert!(has_def(&index, "src/app.js", "main", "function"));
    assert!(has_def(&index, "src/cart.ts", "total", "function"));
    assert!(has_def(&index, "src/cart.ts", "Cart", "class"));
    assert!(has_def(&index, "src/lib/index.js", "get", "method"));
    assert!(has_def(&index, "src/view.tsx", "View", "function"));
    assert!(refs(&index, "src/app.js").contains(&"total".to_string()));
    let graph = FileGraph::build(&index);
    assert_eq!(
        imports_of(&index, &graph, "src/app.js"),
        vec!["src/cart.ts", "src/lib/index.js"]
    );
    assert_eq!(
        imports_of(&index, &graph, "src/view.tsx"),
        vec!["src/cart.ts"]
    );
}

#[test]
fn go_definitions_and_package_imports() {
    let repo = Repo::new(&[
        ("go.mod", "module example.com/m\n"),
        ("util/strings.go", "package util\n\n// Reverse reverses.\nfunc Reverse(s string) string { return s }\n\ntype Box struct{}\n\nfunc (b *Box) Open() {}\n"),
        ("main.go", "package main\n\nimport (\n\t\"fmt\"\n\t\"example.com/m/util\"\n)\n\nfunc main() { fmt.Println(util.Reverse(\"x\")) }\n"),
    ]);
    let index = repo.index();
    assert!(has_def(&index, "util/strings.go", "Reverse", "function"));
    assert!(has_def(&index, "util/strings.go", "Open", "method"));
    assert!(has_def(&index, "util/strings.go", "Box", "type"));
    let rev = file(&index, "util/strings.go")
        .facts
        .defs
        .iter()
        .find(|d| d.name == "Reverse")
        .unwrap();
    assert_eq!(rev.doc.as_deref(), Some("Reverse reverses."));
    assert!(refs(&index, "main.go").contains(&"Reverse".to_string()));
    let graph = FileGraph::build(&index);
    assert_eq!(
        imports_of(&index, &graph, "main.go"),
        vec!["util/strings.go"]
    );
}

#[test]
fn java_definitions_and_imports() {
    let repo = Repo::new(&[
        (
            "src/main/java/com/ex/App.java",
            "package com.ex;\n\nimport com.ex.util.Tool;\n\npublic class App {\n    public void run() { new Tool().apply(); }\n}\n",
        ),
        ("src/main/java/com/ex/util/Tool.java", "package com.ex.util;\n\npublic class Tool {\n    public int apply() { return 1; }\n}\n"),
    ]);
    let index = repo.index();
    assert!(has_def(
        &index,
        "src/main/java/com/ex/App.java",
        "App",
        "class"
    ));
    assert!(has_def(
        &index,
        "src/main/java/com/ex/App.java",
        "run",
        "method"
    ));
    assert!(has_def(
        &index,
        "src/main/java/com/ex/util/Tool.java",
        "apply",
        "method"
    ));
    assert!(refs(&index, "src/main/java/com/ex/App.java").contains(&"apply".to_string()));
    let graph = FileGraph::build(&index);
    assert_eq!(
        imports_of(&index, &graph, "src/main/java/com/ex/App.java"),
        vec!["src/main/java/com/ex/util/Tool.java"]
    );
}

#[test]
fn c_and_cpp_definitions_and_includes() {
    let repo = Repo::new(&[
        ("src/util.h", "#ifndef UTIL_H\n#define UTIL_H\nint add(int a, int b);\nstruct point { int x; };\n#endif\n"),
        ("src/util.c", "#include \"util.h\"\nint add(int a, int b) { return a + b; }\n"),
        ("src/main.c", "#include <stdio.h>\n#include \"util.h\"\nint main(void) { return add(1, 2); }\n"),
        ("src/widget.cpp", "#include \"util.h\"\nclass Widget {\npublic:\n  int size() const { return 1; }\n};\nint Widget_free() { return add(1, 1); }\n"),
    ]);
    let index = repo.index();
    assert!(has_def(&index, "src/util.c", "add", "function"));
    assert!(has_def(&index, "src/main.c", "main", "function"));
    assert!(has_def(&index, "src/widget.cpp", "Widget", "class"));
    assert!(has_def(&index, "src/widget.cpp", "Widget_free", "function"));
    assert!(refs(&index, "src/main.c").contains(&"add".to_string()));
    let graph = FileGraph::build(&index);
    assert_eq!(imports_of(&index, &graph, "src/main.c"), vec!["src/util.h"]);
    assert_eq!(
        imports_of(&index, &graph, "src/widget.cpp"),
        vec!["src/util.h"]
    );
}

#[test]
fn ignore_files_and_hidden_directories_are_respected() {
    let repo = Repo::new(&[
        (".gitignore", "build/\n*.log\n"),
        ("build/gen.py", "def generated(): pass\n"),
        ("debug.log", "noise\n"),
        (".hidden/secret.py", "def hidden(): pass\n"),
        ("keep.py", "def kept(): pass\n"),
    ]);
    let index = repo.index();
    let paths: Vec<&str> = index.files.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(paths, vec!["keep.py"]);
}
