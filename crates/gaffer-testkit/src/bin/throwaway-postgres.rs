//! Starts the tests' throwaway PostgreSQL (never the one `GAFFER_TEST_POSTGRES_URL`
//! names), prints `postgres://…` of a fresh database on stdout and waits until
//! killed: the testkit's own test kills it to show the server does not outlive it.

#[tokio::main(flavor = "current_thread")]
async fn main() {
    std::env::remove_var(gaffer_testkit::postgres::URL_ENV);
    let url = gaffer_testkit::postgres::fresh_database().await;
    println!("{url}");
    use std::io::Write;
    std::io::stdout().flush().ok();
    std::future::pending::<()>().await;
}
