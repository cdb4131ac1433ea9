//! The notification outbox: a delivery is claimed by one deliverer at a time,
//! however many processes share the journal; an expired claim is taken over; the
//! follower's cursor only moves forward.

use super::support::*;
use gaffer_store::{now_ms, Journal, NotifyItem};
use std::sync::Arc;

fn item(id: &str) -> NotifyItem {
    let now = now_ms();
    NotifyItem {
        id: id.into(),
        target: "ops".into(),
        payload: "{}".into(),
        created_at: now,
        attempts: 0,
        next_at: now,
        state: "pending".into(),
        delivered_at: None,
        last_error: String::new(),
    }
}

fn ids(items: &[NotifyItem]) -> Vec<&str> {
    let mut ids: Vec<&str> = items.iter().map(|i| i.id.as_str()).collect();
    ids.sort_unstable();
    ids
}

each_backend! {
async fn a_claimed_notification_is_not_claimed_again_until_its_lease_expires_and_a_stale_claim_records_nothing(b: Backend) {
    let t = temp_journal(b).await;
    // Two processes on one journal: two connections, each its own pool.
    let (first, second): (Arc<dyn Journal>, Arc<dyn Journal>) = (t.journal.clone(), t.reopen().await);
    first.notify_enqueue(&[item("ops/approval/ap-1"), item("ops/approval/ap-2")], None).await.unwrap();

    let mine = first.notify_claim(60_000, 1).await.unwrap();
    assert_eq!(ids(&mine), ["ops/approval/ap-1"], "the oldest, and only `limit` of them");
    let theirs = second.notify_claim(60_000, 16).await.unwrap();
    assert_eq!(ids(&theirs), ["ops/approval/ap-2"], "a claimed row is not handed out again");
    assert!(second.notify_claim(60_000, 16).await.unwrap().is_empty());
    assert!(first.notify_claim(60_000, 16).await.unwrap().is_empty());
    let lease_end = mine[0].next_at;
    assert!(lease_end >= now_ms() + 50_000, "the claim holds it for the lease: {lease_end}");
    assert_eq!(first.notify_next_at().await.unwrap(), Some(lease_end.min(theirs[0].next_at)));

    // The first claimer dies: once its lease has passed, the other takes the row over.
    t.sql("UPDATE notify_outbox SET next_at = 1 WHERE id = 'ops/approval/ap-1'").await.unwrap();
    let taken = second.notify_claim(60_000, 16).await.unwrap();
    assert_eq!(ids(&taken), ["ops/approval/ap-1"]);
    let mut delivered = taken[0].clone();
    delivered.attempts = 1;
    delivered.state = "delivered".into();
    delivered.delivered_at = Some(now_ms());
    assert!(second.notify_update(&delivered, taken[0].next_at).await.unwrap());

    // The first claimer's late record (its claim ended at 1 … it held `lease_end`) changes nothing.
    let mut late = mine[0].clone();
    late.attempts = 1;
    late.state = "failed".into();
    late.last_error = "HTTP 500".into();
    assert!(!first.notify_update(&late, lease_end).await.unwrap());
    let outbox = first.notify_outbox(10).await.unwrap();
    let row = outbox.iter().find(|i| i.id == "ops/approval/ap-1").unwrap();
    assert_eq!((row.state.as_str(), row.attempts, row.last_error.as_str()), ("delivered", 1, ""));
    // A delivered row is never claimed again, even with its time long past.
    t.sql("UPDATE notify_outbox SET next_at = 1").await.unwrap();
    assert_eq!(ids(&first.notify_claim(60_000, 16).await.unwrap()), ["ops/approval/ap-2"]);
    assert_eq!(first.notify_next_at().await.unwrap().map(|n| n > 1), Some(true), "ap-2, claimed again");
}
}

each_backend! {
async fn many_deliverers_claiming_at_once_each_take_a_row_once(b: Backend) {
    let t = temp_journal(b).await;
    let items: Vec<NotifyItem> = (0..40).map(|n| item(&format!("ops/done/t-{n:02}"))).collect();
    t.journal.notify_enqueue(&items, None).await.unwrap();
    let mut claimers = Vec::new();
    for _ in 0..4 {
        let j = t.reopen().await;
        claimers.push(tokio::spawn(async move {
            let mut got = Vec::new();
            loop {
                let claimed = j.notify_claim(60_000, 3).await.unwrap();
                if claimed.is_empty() {
                    return got;
                }
                got.extend(claimed.into_iter().map(|i| i.id));
            }
        }));
    }
    let mut all = Vec::new();
    for c in claimers {
        all.extend(c.await.unwrap());
    }
    all.sort_unstable();
    let expected: Vec<String> = items.iter().map(|i| i.id.clone()).collect();
    assert_eq!(all, expected, "each row claimed by exactly one deliverer");
}
}

each_backend! {
async fn the_notify_cursor_only_moves_forward(b: Backend) {
    let t = temp_journal(b).await;
    let j = &t.journal;
    let start = j.notify_cursor().await.unwrap();
    j.notify_enqueue(&[], Some(start + 10)).await.unwrap();
    // A slower follower (another process) writes where it got to: behind.
    j.notify_enqueue(&[], Some(start + 4)).await.unwrap();
    assert_eq!(j.notify_cursor().await.unwrap(), start + 10);
}
}
