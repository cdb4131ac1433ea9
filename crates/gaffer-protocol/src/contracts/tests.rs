//! The tester's answer: the tests it wrote or updated, each tied to what it covers.

use super::{field, parse_object, required, ContractError};
use serde::{Deserialize, Serialize};

const TESTS_EXAMPLE: &str =
    r#"{"tests":[{"path":"tests/test_install.sh","covers":"subtask 1: …"}],"summary":"…"}"#;

/// One test file the tester wrote or updated.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TestFile {
    /// Path relative to the repository root.
    pub path: String,
    /// Which acceptance criterion it checks.
    pub covers: String,
}

/// The tester's final answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TestReport {
    /// The test files, at least one.
    pub tests: Vec<TestFile>,
    /// What the tests check and how they ran for the tester.
    pub summary: String,
}

#[derive(Deserialize)]
struct RawReport {
    tests: Option<Vec<RawTest>>,
    summary: Option<String>,
}

#[derive(Deserialize)]
struct RawTest {
    path: Option<String>,
    covers: Option<String>,
}

impl TestReport {
    /// Parse and validate a tester's final message.
    pub fn parse(text: &str) -> Result<Self, ContractError> {
        let raw: RawReport = parse_object(text, TESTS_EXAMPLE)?;
        let raw_tests = raw.tests.ok_or_else(|| {
            field(
                "tests",
                "is missing; list the test files you wrote or updated",
            )
        })?;
        if raw_tests.is_empty() {
            return Err(field(
                "tests",
                "is empty; write at least one test for the acceptance criteria and list it",
            ));
        }
        let tests = raw_tests
            .into_iter()
            .enumerate()
            .map(|(i, t)| {
                let path = required(t.path, format!("tests[{i}].path"))?;
                if path.starts_with('/') || path.split(['/', '\\']).any(|p| p == "..") {
                    return Err(field(
                        format!("tests[{i}].path"),
                        format!(
                            "is `{path}`; use a path relative to the repository root, without `..`"
                        ),
                    ));
                }
                Ok(TestFile {
                    path,
                    covers: required(t.covers, format!("tests[{i}].covers"))?,
                })
            })
            .collect::<Result<_, _>>()?;
        Ok(TestReport {
            tests,
            summary: required(raw.summary, "summary".into())?,
        })
    }
}
