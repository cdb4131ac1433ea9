//! Fake `codex` agent executable for tests.
fn main() {
    gaffer_testkit::fakes::codex::main();
}
