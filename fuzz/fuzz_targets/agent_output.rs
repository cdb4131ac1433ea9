//! What an agent CLI writes on stdout: the line framing every backend reads through, then
//! Claude's stream-json parser and the Codex/ACP JSON-RPC parser on every line. The first
//! byte picks the chunk size, so the decoder also sees lines cut at every position; the
//! lines must not depend on the cuts.
#![no_main]
use gaffer_agents::claude::parse_stream_line;
use gaffer_agents::jsonrpc::{parse_rpc_line, Framing};
use gaffer_agents::wire::LineDecoder;
use libfuzzer_sys::fuzz_target;

const LIMIT: usize = 256;

fn lines(data: &[u8], chunk: usize) -> Vec<(u64, Result<String, String>)> {
    let mut d = LineDecoder::with_limit(LIMIT);
    let mut out = Vec::new();
    for piece in data.chunks(chunk) {
        d.feed(piece);
        while let Some(l) = d.next_line() {
            out.push((d.line_no(), l.map_err(|b| b.error.to_string())));
        }
    }
    if let Some(l) = d.finish() {
        out.push((d.line_no(), l.map_err(|b| b.error.to_string())));
    }
    out
}

fuzz_target!(|data: &[u8]| {
    let Some((&first, rest)) = data.split_first() else {
        return;
    };
    let chunked = lines(rest, usize::from(first % 64) + 1);
    assert_eq!(chunked, lines(rest, rest.len().max(1)), "lines depend on the cuts");
    for (_, line) in chunked {
        let Ok(line) = line else { continue };
        let _ = parse_stream_line(&line);
        if let Ok(msg) = parse_rpc_line(&line) {
            // What gaffer would write back for it parses again.
            let again = msg.to_value(Framing::Standard).to_string();
            assert!(parse_rpc_line(&again).is_ok(), "{again}");
        }
    }
});
