//! Copying a journal (SQLite to PostgreSQL, say): every event in order, every
//! hash chain checked on the way, into an empty target; then the Discord ids
//! and the run-time schedules recorded beside it.

use crate::hash::{event_hash, GENESIS_HASH};
use crate::journal::{Journal, NewEvent, RecordedEvent};
use crate::{Result, StoreError};
use gaffer_core::StreamId;
use serde::Serialize;
use std::collections::HashMap;

/// What [`copy_journal`] copied.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Copied {
    /// Streams copied.
    pub streams: usize,
    /// Events copied.
    pub events: usize,
    /// Discord message ids copied (so an adapter on the target re-attaches to
    /// its threads and messages instead of posting them again).
    pub discord_messages: usize,
    /// Schedules added at run time, removed ones included (who removed them).
    pub schedules: usize,
}

/// Events read from the source at a time.
const PAGE: i64 = 1000;

/// Copy every event of `from` into `to`, in global order, stream by stream
/// batches. The source must verify (every chain and its projections), the target
/// must hold no event, and every copied event must get the very hash it has in the
/// source; the target then verifies. On any refusal nothing more is copied; a
/// refusal before the first append leaves the target untouched.
pub async fn copy_journal(from: &dyn Journal, to: &dyn Journal) -> Result<Copied> {
    if !to.events_after(0, 1).await?.is_empty() {
        return Err(StoreError::Copy(format!(
            "{} already holds events; copy into an empty database",
            to.location()
        )));
    }
    let report = from.verify().await?;
    if let Some(b) = report.broken {
        return Err(StoreError::Copy(format!(
            "{} does not verify (`{}` seq {}: {}); nothing was copied",
            from.location(),
            b.stream,
            b.seq,
            b.problem
        )));
    }
    // (seq, hash) of every stream's head in the target, as copied so far.
    let mut heads: HashMap<String, (i64, String)> = HashMap::new();
    let mut after = 0;
    let mut events = 0usize;
    loop {
        let page = from.events_after(after, PAGE).await?;
        let Some(last) = page.last() else { break };
        after = last.pos;
        // Consecutive events of one stream go in one append.
        let mut batch: Vec<RecordedEvent> = Vec::new();
        for e in page {
            if batch.last().is_some_and(|b| b.stream_id != e.stream_id) {
                copy_batch(to, &mut heads, std::mem::take(&mut batch)).await?;
            }
            events += 1;
            batch.push(e);
        }
        copy_batch(to, &mut heads, batch).await?;
    }
    let check = to.verify().await?;
    if let Some(b) = check.broken {
        return Err(StoreError::Copy(format!(
            "the copy in {} does not verify (`{}` seq {}: {})",
            to.location(),
            b.stream,
            b.seq,
            b.problem
        )));
    }
    let messages = from.discord_messages().await?;
    for m in &messages {
        to.discord_message_put(m).await?;
    }
    let schedules = from.schedules(true).await?;
    for s in &schedules {
        to.schedule_add(s).await?;
    }
    Ok(Copied {
        streams: heads.len(),
        events,
        discord_messages: messages.len(),
        schedules: schedules.len(),
    })
}

async fn copy_batch(
    to: &dyn Journal,
    heads: &mut HashMap<String, (i64, String)>,
    batch: Vec<RecordedEvent>,
) -> Result<()> {
    let Some(first) = batch.first() else {
        return Ok(());
    };
    let stream = first.stream_id.clone();
    let (mut seq, mut prev) = heads
        .get(&stream)
        .cloned()
        .unwrap_or((0, GENESIS_HASH.to_owned()));
    let expected_head = seq;
    // Check the chain as the target will write it: same bytes, same hashes.
    for e in &batch {
        seq += 1;
        let payload = serde_json::to_string(&e.event)
            .map_err(|err| StoreError::Copy(format!("event {} of `{stream}`: {err}", e.seq)))?;
        if e.seq != seq || event_hash(&prev, &stream, seq, e.at, &payload) != e.hash {
            return Err(StoreError::Copy(format!(
                "event {} of `{stream}` breaks its hash chain; the copy stopped there",
                e.seq
            )));
        }
        prev = e.hash.clone();
    }
    let news = batch
        .into_iter()
        .map(|e| NewEvent {
            at: e.at,
            event: e.event,
        })
        .collect();
    let appended = to
        .append(&StreamId::from(stream.as_str()), expected_head, news)
        .await?;
    if appended.head_seq != seq || appended.head_hash != prev {
        return Err(StoreError::Copy(format!(
            "`{stream}` got head {} ({}) in the target, not {seq} ({prev})",
            appended.head_seq, appended.head_hash
        )));
    }
    heads.insert(stream, (seq, prev));
    Ok(())
}
