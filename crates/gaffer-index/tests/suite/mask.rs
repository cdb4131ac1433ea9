//! Secure mode's masking: identifiers, strings and comments become placeholders, the
//! program keeps its shape (it still parses with its grammar), and unmasking gives the
//! source back byte for byte.

use gaffer_index::lang::grammar;
use gaffer_index::{Lang, Masker};
use pretty_assertions::assert_eq;
use proptest::prelude::*;

fn parses_cleanly(lang: Lang, text: &str) -> bool {
    let mut p = tree_sitter::Parser::new();
    p.set_language(&grammar(lang).unwrap().language).unwrap();
    !p.parse(text, None).unwrap().root_node().has_error()
}

/// Whether `word` occurs in `text` as a whole word.
fn has_word(text: &str, word: &str) -> bool {
    text.match_indices(word).any(|(i, _)| {
        let before = text[..i].chars().next_back();
        let after = text[i + word.len()..].chars().next();
        let edge = |c: Option<char>| c.is_none_or(|c| !(c.is_alphanumeric() || c == '_'));
        edge(before) && edge(after)
    })
}

const PYTHON: &str = r#"import ledger_store
from billing.rates import tax_rate as rate_of

class InvoiceBook(BaseBook):
    """Keeps the open invoices."""

    def settle_total(self, customer_id, *, discount=0.25):
        # refunds are not counted
        lines = [l for l in self.open_lines if l.owner == customer_id]
        label = f"due for {customer_id}: {len(lines)}"
        return sum(l.amount for l in lines) * (1 - discount), label, b'raw\x00'
"#;

const RUST: &str = r##"use std::collections::HashMap;

/// A ledger of invoices.
#[derive(Debug, Clone)]
pub struct InvoiceLedger<'a> {
    owner: &'a str,
    totals: HashMap<String, u64>,
}

impl<'a> InvoiceLedger<'a> {
    // settle one customer
    pub fn settle_total(&mut self, customer_id: &str) -> Result<u64, String> {
        let sum = self.totals.get(customer_id).copied().ok_or_else(|| format!("no invoice for {customer_id}"))?;
        println!("settled {} for {}", sum, self.owner);
        let raw = r#"raw "quoted" text"#;
        /* block comment */
        Ok(sum + raw.len() as u64 + 0x1f)
    }
}
"##;

const JS: &str = r#"import { taxRate } from './rates.js';

// Keeps the open invoices.
export class InvoiceBook extends BaseBook {
  #secretTotal = 0;
  settleTotal(customerId, { discount = 0.25 } = {}) {
    const lines = this.openLines.filter((line) => line.owner === customerId);
    const label = `due for ${customerId}: ${lines.length}`;
    if (/^acct-\d+$/.test(customerId)) { console.log('matched', label); }
    return lines.reduce((acc, l) => acc + l.amount * taxRate, this.#secretTotal) * (1 - discount);
  }
}
"#;

const TS: &str = r#"import type { Rate } from "./rates";

/** An invoice line. */
interface InvoiceLine {
  owner: string;
  amount: number;
}

export function settleTotal<T extends InvoiceLine>(lines: T[], customerId: string, rate: Rate): number {
  const mine = lines.filter((line: T) => line.owner === customerId);
  return mine.reduce((acc, l) => acc + l.amount * rate.value, 0); // totals
}
"#;

const TSX: &str = r#"export function Badge({ customerName }: { customerName: string }) {
  return <span className="badge-name">Hello {customerName}, your invoices are due</span>;
}
"#;

/// What the fixtures define and say, listed by hand (not by the masker).
const SECRETS: &[(&str, &[&str])] = &[
    (
        "python",
        &[
            "ledger_store",
            "billing",
            "rates",
            "tax_rate",
            "rate_of",
            "InvoiceBook",
            "BaseBook",
            "settle_total",
            "customer_id",
            "discount",
            "lines",
            "open_lines",
            "owner",
            "label",
            "amount",
            "Keeps the open invoices.",
            "refunds are not counted",
            "due for",
            "raw",
        ],
    ),
    (
        "rust",
        &[
            "collections",
            "HashMap",
            "InvoiceLedger",
            "owner",
            "totals",
            "settle_total",
            "customer_id",
            "ok_or_else",
            "no invoice for",
            "settled",
            "quoted",
            "block comment",
            "A ledger of invoices",
            "settle one customer",
            "Debug",
            "Clone",
        ],
    ),
    (
        "javascript",
        &[
            "taxRate",
            "rates",
            "InvoiceBook",
            "BaseBook",
            "secretTotal",
            "settleTotal",
            "customerId",
            "discount",
            "openLines",
            "filter",
            "line",
            "owner",
            "label",
            "due for",
            "acct",
            "matched",
            "reduce",
            "amount",
            "Keeps the open invoices",
        ],
    ),
    (
        "typescript",
        &[
            "Rate",
            "rates",
            "InvoiceLine",
            "owner",
            "amount",
            "settleTotal",
            "lines",
            "customerId",
            "rate",
            "mine",
            "totals",
            "An invoice line",
        ],
    ),
    (
        "tsx",
        &[
            "Badge",
            "customerName",
            "className",
            "badge-name",
            "Hello",
            "your invoices are due",
        ],
    ),
];

fn fixtures() -> [(Lang, &'static str); 5] {
    [
        (Lang::Python, PYTHON),
        (Lang::Rust, RUST),
        (Lang::JavaScript, JS),
        (Lang::TypeScript, TS),
        (Lang::Tsx, TSX),
    ]
}

#[test]
fn each_language_is_masked_parses_and_unmasks_to_the_source() {
    for (lang, source) in fixtures() {
        assert!(parses_cleanly(lang, source), "fixture {lang:?} has errors");
        let mut m = Masker::new();
        let masked = m.mask_source(lang, source);
        assert!(
            parses_cleanly(lang, &masked),
            "{lang:?} masked does not parse:\n{masked}"
        );
        assert_eq!(m.unmask(&masked), source, "{lang:?}");
        let secrets = SECRETS.iter().find(|(t, _)| *t == lang.tag()).unwrap().1;
        for s in secrets {
            assert!(
                !has_word(&masked, s),
                "{lang:?}: `{s}` survived masking:\n{masked}"
            );
        }
        // Keywords, numbers and layout stay: the program keeps its shape.
        assert_eq!(masked.lines().count(), source.lines().count(), "{lang:?}");
    }
}

#[test]
fn structure_and_numbers_stay_and_one_name_gets_one_placeholder() {
    let mut m = Masker::new();
    let masked = m.mask_source(Lang::Python, PYTHON);
    for kept in [
        "class", "def", "return", "for", "in", "if", "import", "from", "0.25", "1",
    ] {
        assert!(has_word(&masked, kept), "`{kept}` was masked:\n{masked}");
    }
    // `customer_id` occurs twice outside strings: one placeholder for both, in this file
    // and in the next one masked with the same table.
    let p = m.mask_words("customer_id");
    let uses = masked
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| *w == p)
        .count();
    assert_eq!(uses, 2, "{masked}");
    let rust = m.mask_source(Lang::Rust, RUST);
    assert!(has_word(&rust, &p), "{rust}");
}

#[test]
fn paths_and_skeleton_lines_are_masked_with_the_same_table() {
    let mut m = Masker::new();
    m.mask_source(Lang::Python, "import ledger_store\n");
    let path = m.mask_path("src/ledger_store.py");
    let skeleton = m.mask_words("class InvoiceBook(BaseBook): def settle_total(self)");
    assert_eq!(path, "id2/id1.py");
    assert_eq!(skeleton, "class id3(id4): def id5(self)");
    assert_eq!(m.unmask(&path), "src/ledger_store.py");
}

fn ident() -> impl Strategy<Value = String> {
    "[a-z][a-z0-9_]{2,8}_[a-z0-9]{1,4}"
}

fn text() -> impl Strategy<Value = String> {
    "[A-Za-z0-9 .,:;!?()=+-]{3,24}"
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Programs with random names, strings and comments in each language (Go, Java and
    /// C too): the masked
    /// text holds none of them, parses, and unmasks to the program.
    #[test]
    fn random_programs_round_trip_and_leak_nothing(
        a in ident(), b in ident(), c in ident(), s in text(), note in text(),
    ) {
        let programs = [
            (Lang::Python, format!("def {a}({b}):\n    # {note}\n    return {c}({b}, \"{s}\")\n")),
            (Lang::Rust, format!("fn {a}({b}: u32) -> u32 {{\n    // {note}\n    {c}({b}, \"{s}\")\n}}\n")),
            (Lang::JavaScript, format!("function {a}({b}) {{\n  /* {note} */\n  return {c}({b}, '{s}');\n}}\n")),
            (Lang::TypeScript, format!("const {a} = ({b}: number): string => {c}({b}, `{s}`); // {note}\n")),
            (Lang::Go, format!("package {c}\n\nfunc {a}({b} int) string {{\n\t// {note}\n\treturn {c}({b}, \"{s}\")\n}}\n")),
            (Lang::Java, format!("class {c} {{\n  String {a}(int {b}) {{ /* {note} */ return {c}({b}, \"{s}\"); }}\n}}\n")),
            (Lang::C, format!("int {a}(int {b}) {{\n  // {note}\n  return {c}({b}, \"{s}\");\n}}\n")),
        ];
        for (lang, src) in programs {
            let mut m = Masker::new();
            let masked = m.mask_source(lang, &src);
            prop_assert_eq!(m.unmask(&masked), src.clone());
            prop_assert!(parses_cleanly(lang, &masked), "{:?}: {}", lang, masked);
            for secret in [&a, &b, &c] {
                prop_assert!(!has_word(&masked, secret), "{} in {}", secret, masked);
            }
            for secret in [s.trim(), note.trim()] {
                prop_assert!(secret.len() < 3 || !masked.contains(secret), "{} in {}", secret, masked);
            }
        }
    }
}

#[test]
fn a_selected_pack_is_masked_whole_full_files_and_skeletons() {
    use super::support::Repo;
    let repo = Repo::new(&[
        ("billing/ledger.py", PYTHON),
        ("README.md", "The ledger settles invoices.\n"),
    ]);
    let cache = gaffer_index::MemoryCache::default();
    for budget in [4000, 90] {
        let opts = gaffer_index::PackOptions {
            budget,
            ..Default::default()
        };
        let sel = gaffer_index::select_context(
            repo.path(),
            "settle_total in billing/ledger.py",
            &opts,
            gaffer_index::TokenizerKind::Cl100k,
            &cache,
        )
        .unwrap();
        let mut m = Masker::new();
        let pack = m.mask_pack(&sel);
        assert!(pack.contains("----- id"), "{pack}");
        for s in SECRETS[0].1.iter().chain(&["ledger", "settles", "README"]) {
            assert!(!has_word(&pack, s), "`{s}` in\n{pack}");
        }
        if budget == 4000 {
            // The full file in the pack unmasks to the file.
            assert!(m.unmask(&pack).contains(PYTHON), "{}", m.unmask(&pack));
        } else {
            assert!(pack.contains("(skeleton) -----"), "{pack}");
            assert!(pack.contains("  # L"), "{pack}");
        }
    }
}

#[test]
fn a_word_that_starts_with_a_digit_is_kept_only_when_it_is_a_number() {
    // Text without a grammar (a doc, a config) and a C macro's value are masked word by
    // word: a name there may start with a digit, and only numbers may stay.
    let doc = "Rotate 2fa_vault_acme every 30 days (0x1f_ff, 1_000 tries).\n";
    let c = "#define VAULT 2fa_vault_acme\n";
    for (lang, source) in [(Lang::Text, doc), (Lang::C, c)] {
        let mut m = Masker::new();
        let masked = m.mask_source(lang, source);
        assert!(!has_word(&masked, "2fa_vault_acme"), "{lang:?}: {masked}");
        assert_eq!(m.unmask(&masked), source, "{lang:?}");
    }
    let mut m = Masker::new();
    let masked = m.mask_source(Lang::Text, doc);
    for kept in ["30", "0x1f_ff", "1_000"] {
        assert!(has_word(&masked, kept), "`{kept}` was masked: {masked}");
    }
}

#[test]
fn a_path_keeps_only_an_extension_gaffer_knows() {
    let mut m = Masker::new();
    let path = m.mask_path("keys/vault.acme");
    assert_eq!(path, "id1/file1");
    assert_eq!(m.mask_path("src/main.rs"), "id2/id3.rs");
    assert_eq!(m.mask_path("docs/notes.md"), "id4/id5.md");
    assert_eq!(m.unmask(&path), "keys/vault.acme");
}

#[test]
fn a_string_of_the_source_quoted_in_prose_without_quotes_is_masked_whole() {
    let mut m = Masker::new();
    m.mask_source(
        Lang::Python,
        "REFUND = \"refund-line\"\nNOTE = \"Add up the open rows\"\nX = \"ok\"\n",
    );
    let said = "skip refund-line rows (not refund-lines), as Add up the open rows says; ok?";
    let masked = m.mask_prose(said);
    assert_eq!(
        masked,
        "skip str1 rows (not refund-lines), as str2 says; ok?"
    );
    assert_eq!(m.unmask(&masked), said);
    // In quotes it was the string already; a placeholder a person writes stays theirs.
    assert_eq!(m.mask_prose("\"refund-line\" or str1"), "\"str1\" or id4");
}
