//! Fake `acp` agent executable for tests.
fn main() {

}
