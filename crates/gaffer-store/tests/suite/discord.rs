//! The Discord adapter's ids: recorded beside the journal, read back after a reopen.
use super::support::*;
use gaffer_store::DiscordMessage;

fn msg(kind: &str, id: &str, message: &str, rendered: &str) -> DiscordMessage {
    DiscordMessage {
        kind: kind.into(),
        gaffer_id: id.into(),
        channel_id: "100".into(),
        message_id: message.into(),
        rendered: rendered.into(),
    }
}

each_backend! {
async fn discord_ids_are_kept_per_kind_and_record_and_survive_a_reopen(b: Backend) {
    let t = temp_journal(b).await;
    let j = &t.journal;
    assert_eq!(j.discord_message("thread", "t-1").await.unwrap(), None);
    j.discord_message_put(&msg("thread", "t-1", "900", "")).await.unwrap();
    j.discord_message_put(&msg("status", "t-1", "901", "a")).await.unwrap();
    // The same key again replaces what it shows; another kind is another row.
    j.discord_message_put(&msg("status", "t-1", "901", "b")).await.unwrap();
    let again = t.reopen().await;
    assert_eq!(
        again.discord_message("status", "t-1").await.unwrap(),
        Some(msg("status", "t-1", "901", "b"))
    );
    assert_eq!(
        again.discord_message("thread", "t-1").await.unwrap(),
        Some(msg("thread", "t-1", "900", ""))
    );
    assert_eq!(again.discord_message("thread", "t-2").await.unwrap(), None);
    // Found by where it is: a thread's task from the thread's channel id.
    let mut other = msg("thread", "t-3", "950", "");
    other.channel_id = "950".into();
    again.discord_message_put(&other).await.unwrap();
    assert_eq!(
        again.discord_message_in("thread", "950").await.unwrap(),
        Some(other)
    );
    assert_eq!(
        again.discord_message_in("thread", "100").await.unwrap().map(|m| m.gaffer_id),
        Some("t-1".into())
    );
    assert_eq!(again.discord_message_in("thread", "901").await.unwrap(), None);
    assert_eq!(again.discord_message_in("note", "950").await.unwrap(), None);
    // Not part of the journal: verify and rebuild leave the ids alone.
    assert_eq!(again.verify().await.unwrap().broken, None);
    again.rebuild().await.unwrap();
    assert_eq!(
        again.discord_message("status", "t-1").await.unwrap().map(|m| m.rendered),
        Some("b".into())
    );
}
}
