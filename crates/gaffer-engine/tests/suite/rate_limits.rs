//! The built-in agent's requests per day are counted in the journal's database, so
//! a restart (or another gaffer process on the same database) does not reset them.

use gaffer_agents::ratelimit::{Limiters, RateLimits};
use gaffer_engine::JournalCounters;
use gaffer_store::{Durability, Journal, SqliteJournal};
use std::sync::Arc;

async fn open(path: &std::path::Path) -> Arc<dyn Journal> {
    Arc::new(SqliteJournal::open(path, Durability::Normal).await.unwrap())
}

fn limiters(journal: &Arc<dyn Journal>) -> Limiters {
    let limits = RateLimits {
        rpm: 10_000,
        rpd: 3,
        tpm: None,
    };
    Limiters::new(Arc::new(JournalCounters(journal.clone())), limits)
}

#[tokio::test]
async fn requests_per_day_hold_across_a_restart_and_per_model() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("gaffer.db");
    let journal = open(&db).await;
    let first = limiters(&journal).get("openai", "gpt-4.1-mini");
    for _ in 0..2 {
        assert_eq!(first.check().await.unwrap(), None);
    }
    journal.shutdown().await;

    // A new process: the day's two requests are remembered, one is left.
    let journal = open(&db).await;
    let again = limiters(&journal);
    let limiter = again.get("openai", "gpt-4.1-mini");
    assert_eq!(limiter.check().await.unwrap(), None);
    let wait = limiter
        .check()
        .await
        .unwrap()
        .expect("the fourth request of the day must wait");
    assert_eq!(wait.reason, "rpd");
    assert!(wait.delay <= std::time::Duration::from_secs(86_400));
    // Another model has its own count.
    assert_eq!(again.get("openai", "gpt-4.1").check().await.unwrap(), None);
    let today = gaffer_agents::ratelimit::utc_day(std::time::SystemTime::now());
    assert_eq!(
        journal
            .counter_get("openai:gpt-4.1-mini", &today)
            .await
            .unwrap(),
        3
    );
}
