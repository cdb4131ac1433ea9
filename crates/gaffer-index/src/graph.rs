//! The file graph: imports resolved to files and definition/reference links, plus a
//! personalised PageRank over it.

use rayon::prelude::*;
use rustc_hash::FxHashMap as HashMap;

use crate::facts::Import;
use crate::index::{Index, IndexedFile};
use crate::lang::Lang;

/// Why two files are linked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EdgeKind {
    /// The source file imports the target.
    Import,
    /// The source file references a name the target defines.
    Reference,
}

/// A directed, weighted edge.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Edge {
    /// Target file index.
    pub to: usize,
    /// Weight (> 0).
    pub weight: f32,
    /// Why.
    pub kind: EdgeKind,
}

/// Graph over the files of an index (indices into `Index::files`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FileGraph {
    /// Outgoing edges per file.
    pub out: Vec<Vec<Edge>>,
    /// Incoming edges per file (`to` is the source).
    pub inc: Vec<Vec<Edge>>,
    /// Files defining each name.
    pub definers: HashMap<String, Vec<usize>>,
    /// Which file list the graph was built for ([`FileGraph::update`] checks it).
    files_key: u64,
}

/// A name defined in more files than this is too generic to link files by.
const MAX_DEFINERS: usize = 8;

struct Resolver<'a> {
    files: &'a [IndexedFile],
    by_path: HashMap<&'a str, usize>,
    /// Python: dotted module suffix → files.
    py_modules: HashMap<String, Vec<usize>>,
    /// Python: full dotted module path (from the root) → file.
    py_full: HashMap<String, usize>,
    /// Last path component → files.
    by_name: HashMap<&'a str, Vec<usize>>,
    /// Directory → files in it.
    by_dir: HashMap<&'a str, Vec<usize>>,
    /// Go modules: (module path from `go.mod`, directory of that `go.mod`).
    go_modules: Vec<(String, String)>,
}

fn dir_of(p: &str) -> &str {
    p.rfind('/').map(|i| &p[..i]).unwrap_or("")
}

fn normalize(path: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for c in path.split('/') {
        match c {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            c => parts.push(c),
        }
    }
    parts.join("/")
}

fn py_components(path: &str) -> Option<Vec<&str>> {
    let stem = path
        .strip_suffix(".py")
        .or_else(|| path.strip_suffix(".pyi"))?;
    let mut comps: Vec<&str> = stem.split('/').collect();
    if comps.last() == Some(&"__init__") {
        comps.pop();
    }
    Some(comps)
}

impl<'a> Resolver<'a> {
    fn new(files: &'a [IndexedFile]) -> Self {
        let mut r = Resolver {
            files,
            by_path: HashMap::default(),
            py_modules: HashMap::default(),
            py_full: HashMap::default(),
            by_name: HashMap::default(),
            by_dir: HashMap::default(),
            go_modules: Vec::new(),
        };
        for (i, f) in files.iter().enumerate() {
            r.by_path.insert(f.path.as_str(), i);
            let name = f.path.rsplit('/').next().unwrap_or(&f.path);
            r.by_name.entry(name).or_default().push(i);
            r.by_dir.entry(dir_of(&f.path)).or_default().push(i);
            if let Some(comps) = py_components(&f.path) {
                r.py_full.insert(comps.join("."), i);
                for k in 0..comps.len() {
                    r.py_modules
                        .entry(comps[k..].join("."))
                        .or_default()
                        .push(i);
                }
            }
        }
        r
    }

    /// A resolver over the files of `index`, with the Go modules its `go.mod` files declare.
    fn for_index(index: &'a Index) -> Self {
        let mut resolver = Resolver::new(&index.files);
        for f in index
            .files
            .iter()
            .filter(|f| f.path == "go.mod" || f.path.ends_with("/go.mod"))
        {
            let Ok(text) = std::fs::read_to_string(index.root.join(&f.path)) else {
                continue;
            };
            if let Some(module) = text.lines().find_map(|l| l.trim().strip_prefix("module ")) {
                let module = module.trim().trim_matches('"').to_string();
                resolver
                    .go_modules
                    .push((module, dir_of(&f.path).to_string()));
            }
        }
        // Longest module path first, so nested modules win.
        resolver
            .go_modules
            .sort_by_key(|m| std::cmp::Reverse(m.0.len()));
        resolver
    }

    fn py_lookup(&self, dotted: &str) -> Option<usize> {
        let c = self.py_modules.get(dotted)?;
        if !dotted.contains('.') && c.len() > 2 {
            return None;
        }
        c.iter()
            .copied()
            .min_by_key(|&i| (self.files[i].path.len(), i))
    }

    fn resolve_python(&self, from: usize, imp: &Import, out: &mut Vec<usize>) {
        if imp.level == 0 {
            let mut any = false;
            for n in &imp.names {
                if let Some(t) = self.py_lookup(&format!("{}.{n}", imp.module)) {
                    out.push(t);
                    any = true;
                }
            }
            if !any {
                if let Some(t) = self.py_lookup(&imp.module) {
                    out.push(t);
                }
            }
            return;
        }
        let path = &self.files[from].path;
        let Some(mut pkg) = py_components(path) else {
            return;
        };
        if !path.ends_with("__init__.py") {
            pkg.pop();
        }
        for _ in 1..imp.level {
            pkg.pop();
        }
        let mut base = pkg.join(".");
        if !imp.module.is_empty() {
            if !base.is_empty() {
                base.push('.');
            }
            base.push_str(&imp.module);
        }
        let mut any = false;
        for n in &imp.names {
            let key = if base.is_empty() {
                n.clone()
            } else {
                format!("{base}.{n}")
            };
            if let Some(&t) = self.py_full.get(&key) {
                out.push(t);
                any = true;
            }
        }
        if !any {
            if let Some(&t) = self.py_full.get(&base) {
                out.push(t);
            }
        }
    }

    fn by_suffix(&self, suffix: &str) -> Option<usize> {
        let name = suffix.rsplit('/').next().unwrap_or(suffix);
        self.by_name.get(name)?.iter().copied().find(|&i| {
            let p = &self.files[i].path;
            p == suffix || p.ends_with(&format!("/{suffix}"))
        })
    }

    fn resolve_js(&self, from: usize, imp: &Import, out: &mut Vec<usize>) {
        if !imp.module.starts_with('.') {
            return;
        }
        let base = normalize(&format!(
            "{}/{}",
            dir_of(&self.files[from].path),
            imp.module
        ));
        let exts = [
            "",
            ".ts",
            ".tsx",
            ".js",
            ".jsx",
            ".mjs",
            ".cjs",
            "/index.ts",
            "/index.tsx",
            "/index.js",
            "/index.jsx",
        ];
        for e in exts {
            if let Some(&t) = self.by_path.get(format!("{base}{e}").as_str()) {
                out.push(t);
                return;
            }
        }
    }

    fn resolve_go(&self, import: &str, out: &mut Vec<usize>) {
        for (module, dir) in &self.go_modules {
            let rest = if import == module {
                Some("")
            } else {
                import
                    .strip_prefix(module.as_str())
                    .and_then(|r| r.strip_prefix('/'))
            };
            if let Some(rest) = rest {
                let target = normalize(&format!("{dir}/{rest}"));
                if let Some(files) = self.by_dir.get(target.as_str()) {
                    out.extend(files.iter().copied().filter(|&i| {
                        self.files[i].lang == Lang::Go && !is_test_path(&self.files[i].path)
                    }));
                }
                return;
            }
        }
        // Without a go.mod, match the import path's tail against directories (GOPATH layouts);
        // with one, an import outside the module (stdlib, dependencies) is not in the repository.
        if self.go_modules.is_empty() {
            self.resolve_dir_suffix(import, Lang::Go, out);
        }
    }

    fn resolve_dir_suffix(&self, suffix: &str, lang: Lang, out: &mut Vec<usize>) {
        let comps: Vec<&str> = suffix.split('/').collect();
        for k in 0..comps.len() {
            let s = comps[k..].join("/");
            let candidates: Vec<&&str> = self
                .by_dir
                .keys()
                .filter(|d| **d == s || d.ends_with(&format!("/{s}")))
                .collect();
            if candidates.len() == 1 && (comps.len() - k >= 2 || k == 0) {
                if let Some(files) = self.by_dir.get(*candidates[0]) {
                    out.extend(files.iter().copied().filter(|&i| {
                        self.files[i].lang == lang && !is_test_path(&self.files[i].path)
                    }));
                }
                return;
            }
        }
    }

    fn resolve_rust(&self, from: usize, imp: &Import, out: &mut Vec<usize>) {
        let path = &self.files[from].path;
        let dir = dir_of(path);
        if imp.level == 1 {
            let file = path.rsplit('/').next().unwrap_or(path);
            let base = if matches!(file, "mod.rs" | "lib.rs" | "main.rs") {
                dir.to_string()
            } else {
                format!("{dir}/{}", file.trim_end_matches(".rs"))
            };
            for cand in [
                format!("{base}/{}.rs", imp.module),
                format!("{base}/{}/mod.rs", imp.module),
            ] {
                if let Some(&t) = self.by_path.get(normalize(&cand).as_str()) {
                    out.push(t);
                    return;
                }
            }
            return;
        }
        let mut segs: Vec<&str> = imp.module.split("::").collect();
        let first = segs.remove(0);
        let base = match first {
            "crate" => match path.find("src/") {
                Some(i) => path[..i + 3].to_string(),
                None => return,
            },
            _ => dir.to_string(),
        };
        let base = if first == "super" {
            dir_of(&base).to_string()
        } else {
            base
        };
        for n in (1..=segs.len()).rev() {
            let m = segs[..n].join("/");
            for cand in [format!("{base}/{m}.rs"), format!("{base}/{m}/mod.rs")] {
                if let Some(&t) = self.by_path.get(normalize(&cand).as_str()) {
                    out.push(t);
                    return;
                }
            }
        }
    }

    fn resolve(&self, from: usize, imp: &Import) -> Vec<usize> {
        let mut out = Vec::new();
        match self.files[from].lang {
            Lang::Python => self.resolve_python(from, imp, &mut out),
            Lang::JavaScript | Lang::TypeScript | Lang::Tsx => self.resolve_js(from, imp, &mut out),
            Lang::Go => self.resolve_go(&imp.module, &mut out),
            Lang::Java => {
                if let Some(pkg) = imp.module.strip_suffix(".*") {
                    self.resolve_dir_suffix(&pkg.replace('.', "/"), Lang::Java, &mut out);
                } else {
                    let p = format!("{}.java", imp.module.replace('.', "/"));
                    let comps: Vec<&str> = p.split('/').collect();
                    for k in 0..comps.len().saturating_sub(1) {
                        if let Some(t) = self.by_suffix(&comps[k..].join("/")) {
                            out.push(t);
                            break;
                        }
                    }
                }
            }
            Lang::C | Lang::Cpp => {
                let local = normalize(&format!(
                    "{}/{}",
                    dir_of(&self.files[from].path),
                    imp.module
                ));
                if let Some(&t) = self.by_path.get(local.as_str()) {
                    out.push(t);
                } else if let Some(t) = self.by_suffix(&normalize(&imp.module)) {
                    out.push(t);
                }
            }
            Lang::Rust => self.resolve_rust(from, imp, &mut out),
            Lang::Text => {}
        }
        out.retain(|&t| t != from);
        out
    }
}

/// Whether a path looks like a test (a `tests/` directory, `test_x.py`, `x_test.go`, `x.spec.ts`…).
pub fn is_test_path(path: &str) -> bool {
    let lower = path.to_ascii_lowercase();
    let mut comps = lower.split('/').collect::<Vec<_>>();
    let file = comps.pop().unwrap_or("");
    if comps.iter().any(|c| {
        matches!(
            *c,
            "test" | "tests" | "testing" | "__tests__" | "spec" | "specs"
        )
    }) {
        return true;
    }
    let stem = file.split('.').next().unwrap_or(file);
    stem.starts_with("test_")
        || stem.ends_with("_test")
        || stem.ends_with("_tests")
        || file.contains(".test.")
        || file.contains(".spec.")
        || stem == "conftest"
        || (path.ends_with("Test.java") || path.ends_with("Tests.java"))
}

/// A digest of the indexed paths in order: a graph can be updated in place only for the same.
fn files_key(files: &[IndexedFile]) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = rustc_hash::FxHasher::default();
    for f in files {
        f.path.hash(&mut h);
    }
    h.finish()
}

/// The outgoing edges of file `i`: its resolved imports, and the files defining the names it
/// references (names defined in more than [`MAX_DEFINERS`] files are too generic).
fn edges_of(
    i: usize,
    f: &IndexedFile,
    resolver: &Resolver,
    definers: &HashMap<String, Vec<usize>>,
) -> Vec<Edge> {
    let mut acc: HashMap<(usize, bool), f32> = HashMap::default();
    for imp in &f.facts.imports {
        for t in resolver.resolve(i, imp) {
            *acc.entry((t, true)).or_insert(0.0) += 1.0;
        }
    }
    for (name, count) in f.facts.refs.iter() {
        let Some(ds) = definers.get(name) else {
            continue;
        };
        if ds.len() > MAX_DEFINERS {
            continue;
        }
        let w = (1.0 + count as f32).ln() / ds.len() as f32;
        for &t in ds {
            if t != i {
                *acc.entry((t, false)).or_insert(0.0) += w;
            }
        }
    }
    let mut edges: Vec<Edge> = acc
        .into_iter()
        .map(|((to, imp), weight)| Edge {
            to,
            weight: if imp { 2.0 * weight } else { weight },
            kind: if imp {
                EdgeKind::Import
            } else {
                EdgeKind::Reference
            },
        })
        .collect();
    edges.sort_by_key(|e| (e.to, e.kind == EdgeKind::Reference));
    edges
}

/// The incoming edges of every file, from the outgoing ones.
fn incoming(out: &[Vec<Edge>]) -> Vec<Vec<Edge>> {
    let mut inc: Vec<Vec<Edge>> = vec![Vec::new(); out.len()];
    for (i, edges) in out.iter().enumerate() {
        for e in edges {
            inc[e.to].push(Edge {
                to: i,
                weight: e.weight,
                kind: e.kind,
            });
        }
    }
    inc
}

impl FileGraph {
    /// Builds the graph of `index`.
    pub fn build(index: &Index) -> Self {
        let files = &index.files;
        let resolver = Resolver::for_index(index);
        let mut definers: HashMap<String, Vec<usize>> = HashMap::default();
        for (i, f) in files.iter().enumerate() {
            for d in &f.facts.defs {
                let v = definers.entry(d.name.clone()).or_default();
                if v.last() != Some(&i) {
                    v.push(i);
                }
            }
        }
        let out: Vec<Vec<Edge>> = files
            .par_iter()
            .enumerate()
            .map(|(i, f)| edges_of(i, f, &resolver, &definers))
            .collect();
        FileGraph {
            inc: incoming(&out),
            out,
            definers,
            files_key: files_key(files),
        }
    }

    /// Brings the graph of an index up to date after `changed` files (paths) changed content,
    /// as [`crate::Index::refresh`] reports them: only the changed files' edges and those of
    /// files that use a name the changed files defined (before or now) are computed again.
    /// The result equals [`FileGraph::build`]; if files were added or removed, or a `go.mod`
    /// changed, it is built again.
    pub fn update(&mut self, index: &Index, changed: &[String]) {
        let go_mod = changed
            .iter()
            .any(|p| p == "go.mod" || p.ends_with("/go.mod"));
        if go_mod || files_key(&index.files) != self.files_key {
            *self = Self::build(index);
            return;
        }
        let by_path: HashMap<&str, usize> = index
            .files
            .iter()
            .enumerate()
            .map(|(i, f)| (f.path.as_str(), i))
            .collect();
        let changed: rustc_hash::FxHashSet<usize> = changed
            .iter()
            .filter_map(|p| by_path.get(p.as_str()).copied())
            .collect();
        if changed.is_empty() {
            return;
        }
        // Names whose definers change. The changed files' names (defined before or now) are
        // candidates; only those whose list of definers differs afterwards move other files'
        // edges (a file that still defines what it defined keeps its users' edges as they are).
        let mut before: HashMap<String, Vec<usize>> = HashMap::default();
        self.definers.retain(|name, files| {
            if files.iter().any(|f| changed.contains(f)) {
                before.insert(name.clone(), files.clone());
                files.retain(|f| !changed.contains(f));
            }
            !files.is_empty()
        });
        for &c in &changed {
            for d in &index.files[c].facts.defs {
                let v = self.definers.entry(d.name.clone()).or_default();
                if let Err(at) = v.binary_search(&c) {
                    v.insert(at, c);
                }
                before.entry(d.name.clone()).or_default();
            }
        }
        let affected: rustc_hash::FxHashSet<&str> = before
            .iter()
            .filter(|(name, old)| self.definers.get(*name).map_or(&[][..], |v| v) != old.as_slice())
            .map(|(name, _)| name.as_str())
            .collect();
        let resolver = Resolver::for_index(index);
        let definers = &self.definers;
        let redone: Vec<(usize, Vec<Edge>)> = index
            .files
            .par_iter()
            .enumerate()
            .filter(|(i, f)| {
                changed.contains(i)
                    || (!affected.is_empty()
                        && f.facts.refs.iter().any(|(n, _)| affected.contains(n)))
            })
            .map(|(i, f)| (i, edges_of(i, f, &resolver, definers)))
            .collect();
        // Incoming lists stay ordered by source, as `incoming` builds them: a redone file's
        // old edges leave its targets' lists, its new ones go in at its place.
        for (i, edges) in redone {
            let old = std::mem::replace(&mut self.out[i], edges);
            let mut targets: Vec<usize> = old.iter().map(|e| e.to).collect();
            targets.dedup();
            for t in targets {
                self.inc[t].retain(|e| e.to != i);
            }
            for e in &self.out[i] {
                let list = &mut self.inc[e.to];
                let at = list.partition_point(|x| x.to <= i);
                list.insert(
                    at,
                    Edge {
                        to: i,
                        weight: e.weight,
                        kind: e.kind,
                    },
                );
            }
        }
    }

    /// Personalised PageRank: `teleport` (any non-negative scores, normalised here) says where
    /// a random walk restarts. Returns one score per file, summing to 1.
    pub fn pagerank(&self, teleport: &[f32], damping: f32, iterations: usize) -> Vec<f32> {
        let n = self.out.len();
        if n == 0 {
            return Vec::new();
        }
        let total: f32 = teleport.iter().sum();
        let p: Vec<f32> = if total > 0.0 {
            teleport.iter().map(|x| x / total).collect()
        } else {
            vec![1.0 / n as f32; n]
        };
        let out_w: Vec<f32> = self
            .out
            .iter()
            .map(|es| es.iter().map(|e| e.weight).sum())
            .collect();
        let mut r = p.clone();
        for _ in 0..iterations {
            let mut next: Vec<f32> = p.iter().map(|x| (1.0 - damping) * x).collect();
            let mut dangling = 0.0;
            for i in 0..n {
                if out_w[i] <= 0.0 {
                    dangling += r[i];
                    continue;
                }
                let share = damping * r[i] / out_w[i];
                for e in &self.out[i] {
                    next[e.to] += share * e.weight;
                }
            }
            for (x, pi) in next.iter_mut().zip(&p) {
                *x += damping * dangling * pi;
            }
            r = next;
        }
        r
    }
}
