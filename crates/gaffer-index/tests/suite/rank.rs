//! Ranking: what the text names comes first, with reasons.

use gaffer_index::{rank, FileGraph, Weights};

use super::support::*;

fn ranked_paths(repo: &Repo, text: &str) -> Vec<(String, Vec<String>)> {
    let index = repo.index();
    let graph = FileGraph::build(&index);
    rank(&index, &graph, text, &Weights::default())
        .into_iter()
        .map(|r| (index.files[r.file].path.clone(), r.reasons))
        .collect()
}

/// A repo where `core/engine.py` matches the words of the texts below far better than the
/// small files the texts name.
fn noisy_repo() -> Repo {
    let loud = "def render_template(template, context):\n    \"\"\"Render the template with the context when the cache is cold.\"\"\"\n    cache = {}\n    template_cache = cache\n    return template_cache\n"
        .repeat(20);
    Repo::new(&[
        ("core/engine.py", &loud),
        ("core/other.py", "def cache_context(): return 'template cache context'\n"),
        ("pkg/helpers.py", "def slugify(value):\n    return value\n"),
        ("pkg/deep/runner.py", "def run_job(job):\n    return job\n"),
        ("tests/test_engine.py", "from core.engine import render_template\n\ndef test_render(): render_template('a', {})\n"),
    ])
}

#[test]
fn a_file_named_in_the_text_ranks_first() {
    let repo = noisy_repo();
    let text = "Rendering the template with a cold cache and context fails; the culprit is pkg/helpers.py.";
    let ranked = ranked_paths(&repo, text);
    assert_eq!(ranked[0].0, "pkg/helpers.py", "{ranked:?}");
    assert!(
        ranked[0].1.iter().any(|r| r.contains("named in text")),
        "{:?}",
        ranked[0].1
    );
}

#[test]
fn a_stack_trace_frame_pulls_in_its_file() {
    let repo = noisy_repo();
    let text = "Template cache context is broken when rendering:\n\nTraceback (most recent call last):\n  File \"/usr/lib/python3.11/site-packages/pkg/deep/runner.py\", line 2, in run_job\n    return job\nKeyError: 'x'\n";
    let ranked = ranked_paths(&repo, text);
    let hit = ranked
        .iter()
        .position(|(p, _)| p == "pkg/deep/runner.py")
        .expect("frame file ranked");
    assert!(hit < 2, "{ranked:?}");
    assert!(
        ranked[hit].1.iter().any(|r| r.contains("runner.py:2")),
        "{:?}",
        ranked[hit].1
    );
}

#[test]
fn a_symbol_named_in_code_ranks_its_definer_first() {
    let repo = noisy_repo();
    let text = "Calling `slugify(value)` on a template cache context returns the wrong value.";
    let ranked = ranked_paths(&repo, text);
    assert_eq!(ranked[0].0, "pkg/helpers.py", "{ranked:?}");
    assert!(
        ranked[0].1.iter().any(|r| r.contains("`slugify`")),
        "{:?}",
        ranked[0].1
    );
}

#[test]
fn lexical_match_ranks_source_above_its_test() {
    let repo = noisy_repo();
    let ranked = ranked_paths(&repo, "render template with cold cache context");
    assert_eq!(ranked[0].0, "core/engine.py", "{ranked:?}");
    let engine_test = ranked.iter().position(|(p, _)| p == "tests/test_engine.py");
    assert!(engine_test.is_some_and(|i| i > 0), "{ranked:?}");
    assert!(
        ranked[0].1.iter().any(|r| r.starts_with("matched terms:")),
        "{:?}",
        ranked[0].1
    );
}

#[test]
fn graph_neighbours_of_a_strong_file_get_a_reason() {
    let repo = Repo::new(&[
        ("app/views.py", "from app.forms import LoginForm\n\ndef login_view(request):\n    return LoginForm(request)\n"),
        ("app/forms.py", "class LoginForm:\n    pass\n"),
        ("app/unrelated.py", "def nothing():\n    pass\n"),
    ]);
    let ranked = ranked_paths(&repo, "login_view returns 500");
    assert_eq!(ranked[0].0, "app/views.py");
    let forms = ranked
        .iter()
        .find(|(p, _)| p == "app/forms.py")
        .expect("neighbour ranked");
    assert!(
        forms
            .1
            .iter()
            .any(|r| r.contains("graph neighbour") && r.contains("app/views.py")),
        "{:?}",
        forms.1
    );
    assert!(
        !ranked.iter().any(|(p, _)| p == "app/unrelated.py"),
        "{ranked:?}"
    );
}

#[test]
fn an_error_message_quoted_in_the_text_finds_the_file_raising_it() {
    let repo = Repo::new(&[
        ("lib/config.py", "def load(path):\n    raise ValueError(\"Unable to load configuration file\")\n"),
        ("lib/loader.py", "def load_configuration(config_file):\n    \"\"\"Load the configuration file.\"\"\"\n    return config_file\n"),
    ]);
    let ranked = ranked_paths(
        &repo,
        "I get `ValueError: Unable to load configuration file (No such file)` on start",
    );
    assert_eq!(ranked[0].0, "lib/config.py", "{ranked:?}");
}

#[test]
fn the_neighbourhood_of_changed_files_comes_with_them() {
    let repo = Repo::new(&[
        (
            "app/models.py",
            "class Order:\n    def total(self):\n        return 1\n",
        ),
        (
            "app/views.py",
            "from app.models import Order\n\ndef show():\n    return Order().total()\n",
        ),
        ("app/util.py", "def fmt(x):\n    return str(x)\n"),
        ("app/models_extra.py", "from app.util import fmt\n"),
        (
            "tests/test_models.py",
            "from app.models import Order\n\ndef test_total():\n    assert Order().total() == 1\n",
        ),
        ("app/unrelated.py", "def nothing():\n    pass\n"),
    ]);
    let index = repo.index();
    let graph = gaffer_index::FileGraph::build(&index);
    let ranked = gaffer_index::rank_neighbourhood(&index, &graph, &["app/models.py".to_string()]);
    let paths: Vec<&str> = ranked
        .iter()
        .map(|r| index.files[r.file].path.as_str())
        .collect();
    assert_eq!(paths[0], "app/models.py");
    assert!(
        paths[1..3].contains(&"app/views.py") && paths[1..3].contains(&"tests/test_models.py"),
        "{paths:?}"
    );
    assert!(!paths.contains(&"app/unrelated.py"), "{paths:?}");
    let test = ranked
        .iter()
        .find(|r| index.files[r.file].path == "tests/test_models.py")
        .unwrap();
    assert_eq!(test.reasons, vec!["test of app/models.py".to_string()]);
}

#[test]
fn select_context_is_the_pipeline_in_one_call() {
    let repo = noisy_repo();
    let sel = gaffer_index::select_context(
        repo.path(),
        "slugify breaks on unicode in pkg/helpers.py",
        &gaffer_index::PackOptions {
            budget: 1500,
            ..Default::default()
        },
        gaffer_index::TokenizerKind::Cl100k,
        &gaffer_index::MemoryCache::new(),
    )
    .unwrap();
    assert_eq!(sel.files[0].path, "pkg/helpers.py");
    assert!(sel.used <= 1500);
}

#[test]
fn a_frame_of_a_file_the_repository_no_longer_has_finds_its_function() {
    let repo = noisy_repo();
    // IPython's traceback format; the installed `pkg/old_runner.py` was since renamed.
    let text = "Template cache context breaks:\n\n~/venv/lib/python3.9/site-packages/pkg/old_runner.py in run_job(job)\n      1 def run_job(job):\n----> 2     return job[0]\n\nKeyError: 0\n";
    let ranked = ranked_paths(&repo, text);
    assert_eq!(ranked[0].0, "pkg/deep/runner.py", "{ranked:?}");
    assert!(
        ranked[0]
            .1
            .iter()
            .any(|r| r == "defines `run_job`, a frame of /venv/lib/python3.9/site-packages/pkg/old_runner.py in the text"),
        "{:?}",
        ranked[0].1
    );
}

#[test]
fn a_versioned_name_finds_the_definer_of_the_unversioned_one() {
    let repo = Repo::new(&[
        (
            "core/engine.py",
            "def render(x):\n    return str(x) + ' is not iterable'\n",
        ),
        (
            "values/person.py",
            "class PersonName:\n    def __init__(self, v):\n        self.v = v\n",
        ),
    ]);
    let text = "Make PersonName3 iterable: `'S' in ds.PatientName` raises TypeError: argument is not iterable";
    let ranked = ranked_paths(&repo, text);
    assert_eq!(ranked[0].0, "values/person.py", "{ranked:?}");
    assert!(
        ranked[0]
            .1
            .iter()
            .any(|r| r.contains("defines `PersonName`")),
        "{:?}",
        ranked[0].1
    );
}
