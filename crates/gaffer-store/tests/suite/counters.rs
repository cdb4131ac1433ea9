//! Persisted counters (requests per day): atomic across writers, kept across reopen,
//! separate per key and day, and never part of the journal.
use super::support::*;

each_backend! {
    async fn counters_add_atomically_and_survive_a_reopen(b: Backend) {
        let t = temp_journal(b).await;
        let second = t.reopen().await;
        // Two connections (as two processes would) adding at once: no update is lost.
        let adders = [t.journal.clone(), second.clone()].map(|j| {
            tokio::spawn(async move {
                for _ in 0..40 {
                    j.counter_add("openai:gpt-4.1-mini", "2026-11-30", 1).await.unwrap();
                }
            })
        });
        for a in adders {
            a.await.unwrap();
        }
        assert_eq!(t.journal.counter_get("openai:gpt-4.1-mini", "2026-11-30").await.unwrap(), 80);
        assert_eq!(second.counter_add("openai:gpt-4.1-mini", "2026-11-30", 5).await.unwrap(), 85);
        // Another day and another key start from zero.
        assert_eq!(t.journal.counter_get("openai:gpt-4.1-mini", "2026-12-01").await.unwrap(), 0);
        assert_eq!(t.journal.counter_get("anthropic:claude-sonnet-4-5", "2026-11-30").await.unwrap(), 0);
        second.shutdown().await;
        t.journal.shutdown().await;

        let reopened = t.reopen().await;
        assert_eq!(reopened.counter_get("openai:gpt-4.1-mini", "2026-11-30").await.unwrap(), 85);
        // Counters are not events: the journal holds none and still verifies.
        assert!(reopened.events_after(0, 10).await.unwrap().is_empty());
        assert!(reopened.verify().await.unwrap().broken.is_none());
    }
}
