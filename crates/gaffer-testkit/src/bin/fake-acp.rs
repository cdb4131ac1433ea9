//! Fake ACP agent executable for tests.
fn main() {
    gaffer_testkit::fakes::acp::main();
}
