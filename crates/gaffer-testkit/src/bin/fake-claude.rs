//! Fake `claude` agent executable for tests.
fn main() {
    gaffer_testkit::fakes::claude::main();
}
