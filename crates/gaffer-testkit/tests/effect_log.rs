//! The effect log that tests count non-idempotent effects in: lines appended by
//! many fakes at once stay whole, so a count never misses or misattributes one.

use gaffer_testkit::scenario::{append_line, read_log};

#[test]
fn lines_appended_at_once_by_many_writers_stay_whole() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("effects.log");
    let writers: Vec<_> = (0..8)
        .map(|w| {
            let log = log.clone();
            std::thread::spawn(move || {
                for n in 0..2000 {
                    append_line(&log, &format!("fake-claude write README.md task=t-{w}-{n}"))
                        .unwrap();
                }
            })
        })
        .collect();
    for w in writers {
        w.join().unwrap();
    }
    let mut lines = read_log(&log);
    lines.sort();
    let mut expected: Vec<String> = (0..8)
        .flat_map(|w| (0..2000).map(move |n| format!("fake-claude write README.md task=t-{w}-{n}")))
        .collect();
    expected.sort();
    assert!(
        lines == expected,
        "{} lines, {} torn or missing",
        lines.len(),
        expected
            .iter()
            .filter(|e| lines.binary_search(e).is_err())
            .count()
    );
}
