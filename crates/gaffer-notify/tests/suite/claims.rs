//! Several notifiers on one journal (two `gaffer serve`, or serve + run): each
//! notification reaches the receiver once, and a notifier that dies holding a
//! claim leaves the row to another once the claim's lease has passed.

use super::support::{webhook, Backend, Gaffer};
use gaffer_notify::{Notifier, Reach, Retry, ServerUrl};
use gaffer_store::Durability;
use gaffer_testkit::notify::FakeWebhook;
use std::collections::BTreeSet;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

fn skip(backend: Backend) -> bool {
    matches!(backend, Backend::Postgres) && !gaffer_testkit::postgres::available()
}

fn retry() -> Retry {
    Retry {
        first: Duration::from_millis(50),
        max: Duration::from_millis(200),
        attempts: 5,
        timeout: Duration::from_secs(1),
        lease: Duration::from_secs(3),
    }
}

async fn two_notifiers_deliver_each_approval_once(backend: Backend) {
    if skip(backend) {
        return;
    }
    let hook = FakeWebhook::start().await.unwrap();
    let g = Gaffer::start_on(backend, vec![webhook("ops", &hook.url(), Some("ana"))]).await;
    let task = g.task().await;
    let stop = CancellationToken::new();
    let other = g.another_process().await;
    let _first = g.notifier(retry(), &stop);
    let _second = g.notifier_of(other, ServerUrl::fixed(&g.base), retry(), &stop);
    let mut asked = BTreeSet::new();
    for n in 0..6 {
        let a = g
            .ask_in(&task, &format!("s{n}"), &format!("make step-{n}"))
            .await;
        asked.insert(format!("ops/approval/{}", a.id));
    }
    g.until("all delivered", |o| {
        o.len() == asked.len() && o.iter().all(|i| i.state == "delivered")
    })
    .await;
    // Both notifiers stay up a while longer: neither sends anything again.
    tokio::time::sleep(Duration::from_millis(800)).await;
    let got: Vec<String> = hook
        .received()
        .iter()
        .map(|r| r.header("x-gaffer-delivery").unwrap().to_owned())
        .collect();
    assert_eq!(got.len(), asked.len(), "one request per approval: {got:#?}");
    assert_eq!(got.into_iter().collect::<BTreeSet<_>>(), asked);
    stop.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_notifiers_on_one_sqlite_journal_deliver_each_approval_once() {
    two_notifiers_deliver_each_approval_once(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_notifiers_on_one_postgres_journal_deliver_each_approval_once() {
    two_notifiers_deliver_each_approval_once(Backend::Postgres).await;
}

/// A notifier in a runtime of its own, as another process would be; dropping
/// the returned sender kills it outright (the runtime is shut down at once:
/// nothing it was doing gets to record anything).
fn doomed_process(
    url: String,
    g: &Gaffer,
    retry: Retry,
) -> (std::sync::mpsc::Sender<()>, std::thread::JoinHandle<()>) {
    let (kill, killed) = std::sync::mpsc::channel::<()>();
    let (targets, key, base) = (g.targets.clone(), g.key.clone(), g.base.clone());
    let thread = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let journal = gaffer_store::open(&url, Durability::Normal).await.unwrap();
            let app = gaffer_app::App::new(journal, gaffer_app::Policy::parse("").unwrap());
            let reach = Reach {
                links: Some(key),
                server: ServerUrl::fixed(&base),
                gaffer: "gaffer".into(),
            };
            let n = Notifier::new(app, targets, reach, retry).unwrap();
            tokio::spawn(n.run(CancellationToken::new()));
            let _ = tokio::task::spawn_blocking(move || killed.recv()).await;
        });
        rt.shutdown_background();
    });
    (kill, thread)
}

async fn a_notifier_killed_holding_a_claim_leaves_the_row_to_another_after_the_lease(
    backend: Backend,
) {
    if skip(backend) {
        return;
    }
    let hook = FakeWebhook::start().await.unwrap();
    // The doomed notifier's request is never answered: it dies mid-delivery.
    hook.hang_next(1);
    let g = Gaffer::start_on(backend, vec![webhook("ops", &hook.url(), None)]).await;
    let task = g.task().await;
    let approval = g.ask(&task, "make deploy").await;
    let id = format!("ops/approval/{}", approval.id);
    let url = g.journal_url();
    let (kill, thread) = doomed_process(url, &g, retry());
    // Claimed: its due time moved to the end of the claim's lease.
    let claimed = g
        .until("claimed", |o| {
            o.iter().any(|i| i.next_at > i.created_at + 2_000)
        })
        .await;
    let lease_end = claimed[0].next_at;
    tokio::time::sleep(Duration::from_millis(300)).await;
    drop(kill);
    thread.join().unwrap();
    hook.hang_next(0);
    assert_eq!(
        g.outbox().await[0].attempts,
        0,
        "the dead notifier recorded nothing"
    );

    let stop = CancellationToken::new();
    let _survivor = g.notifier(retry(), &stop);
    // Not before the claim has lapsed…
    let early = lease_end - gaffer_store::now_ms() - 300;
    if early > 0 {
        tokio::time::sleep(Duration::from_millis(early as u64)).await;
        assert!(
            hook.received().is_empty(),
            "delivered while another held the claim"
        );
    }
    // …then once, by the survivor, under the same delivery id.
    let items = g
        .until("delivered", |o| o.iter().any(|i| i.state == "delivered"))
        .await;
    assert_eq!((items[0].id.as_str(), items[0].attempts), (id.as_str(), 1));
    assert!(items[0].delivered_at.unwrap() >= lease_end);
    let got = hook.received();
    assert_eq!(got.len(), 1, "{got:#?}");
    assert_eq!(got[0].header("x-gaffer-delivery"), Some(id.as_str()));
    stop.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_notifier_killed_holding_a_claim_on_sqlite_leaves_it_to_another_after_the_lease() {
    a_notifier_killed_holding_a_claim_leaves_the_row_to_another_after_the_lease(Backend::Sqlite)
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_notifier_killed_holding_a_claim_on_postgres_leaves_it_to_another_after_the_lease() {
    a_notifier_killed_holding_a_claim_leaves_the_row_to_another_after_the_lease(Backend::Postgres)
        .await;
}
