//! Fake `codex` agent executable for tests.
fn main() {

}
